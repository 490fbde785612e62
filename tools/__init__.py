"""The book's machinery: one package that the tests, the Makefile, the
benchmarks and the maintenance programs import (run them from the
repository's root, e.g. `python -m tools.generate`).

- `tools.book`: where things are (the toc, the chapters) and the facts kept
  in one place (the torch pin in requirements.txt, the torch releases in
  torch_releases.txt).
- `tools.exports`: a chapter's helper code, from its cells tagged `export`.
- `tools.run`: the one notebook runner (a chapter alone in an empty folder,
  in a fresh kernel of any Python).
- `tools.generate`: everything written from another file (`make generate`).
"""

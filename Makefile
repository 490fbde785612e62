# Two commands: `make book` builds the HTML book, `make test` runs every test.
# Both create .venv and install requirements.txt into it on first use.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-requirements

.PHONY: setup book book-strict test dot bench versions clean lint-workflows publish-dry-run

setup: $(STAMP)

# TORCH_INDEX=https://download.pytorch.org/whl/cpu installs requirements.txt's
# torch from that index first (the CPU build, not PyPI's multi-GB CUDA build).
TORCH_INDEX ?=

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(if $(TORCH_INDEX),$(PY) -m pip install --quiet "$$(grep '^torch==' requirements.txt)" --index-url $(TORCH_INDEX))
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $@

# Builds from the outputs stored in the notebooks: no graphviz needed.
book: setup
	$(VENV)/bin/jupyter-book build --quiet .
	@echo "Book: $(CURDIR)/_build/html/index.html"

# The same, with every Sphinx warning an error (used by CI).
book-strict: setup
	$(VENV)/bin/jupyter-book build --all --warningiserror --keep-going --quiet .
	@echo "Book: $(CURDIR)/_build/html/index.html"

# torchviz needs graphviz's `dot` to draw graphs when nbval re-runs them.
dot:
	@command -v dot >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null; \
	  else \
	    echo "graphviz's 'dot' is missing: install it (Debian/Ubuntu: sudo apt-get install graphviz) and run 'make test' again." >&2; \
	    exit 1; \
	  fi; }

# nbval (strict) over every notebook in _toc.yml, plus every test in tests/
# (the browser test reads the book that `book` builds; it is skipped, with
# a message, where Chromium is not installed).
# Stored outputs are compared digit for digit, and PyTorch's CPU kernels round
# differently on AVX2 and AVX-512 machines (chapter 5's training shifts by a
# test image or two). The notebooks are executed, and compared, with the
# kernels held at the AVX2 level that every x86-64 machine of today has.
CPU_KERNELS := ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2

test: setup dot book
	$(CPU_KERNELS) $(PY) -m pytest -p no:cacheprovider \
	  --nbval --nbval-current-env --nbval-cell-timeout=300 \
	  --nbval-sanitize-with tests/sanitize.cfg \
	  $$($(PY) tests/book_files.py) tests/

# Inference speed of dense vs pruned models (timings: not part of `make test`).
bench: setup
	$(PY) benchmarks/tnvp_speed.py

# Every chapter run alone on each torch release (one venv under ../venvs,
# moved from release to release, removed at the end unless KEEP=1;
# VERSIONS="2.5.1 2.9.1" picks a subset), then facts read from each release's
# wheel. Both write the files
# under book/_generated that book/versions.md includes; results are cached by
# a hash of each chapter's code, so a rerun only runs what changed.
versions: setup
	nice -n 10 $(PY) scripts/torch_versions.py
	nice -n 10 $(PY) scripts/wheel_facts.py

clean:
	rm -rf _build

# The student edition: book/student/NN_*.ipynb from the chapters, answers
# left to the student (scripts/student_edition.py). Commit the result.
.PHONY: student
student: setup
	$(PY) scripts/student_edition.py

# The GitHub workflows (and Dependabot's configuration), checked offline:
# fails on any actionlint error and on any zizmor finding of medium severity
# or more (an action not pinned by commit hash, broad permissions, a checkout
# that keeps its token, ...). GITHUB_DIR=path checks another copy.
GITHUB_DIR ?= .github

lint-workflows: setup
	$(VENV)/bin/actionlint $(GITHUB_DIR)/workflows/*.yml
	$(VENV)/bin/zizmor --offline --min-severity medium $(GITHUB_DIR)

# The Pages workflow's build job, run here on a scratch copy of HEAD with
# REPOSITORY as GitHub sets it; then the built site is checked: Colab badges,
# launch buttons and repository button point at REPOSITORY, every local link
# resolves, and the placeholder guard stops a build without REPOSITORY
# (tools/publish.py).
REPOSITORY ?= someone/pruning-book

publish-dry-run: setup
	$(PY) -m tools.publish --repository $(REPOSITORY)

# `make book` builds the HTML book, `make test` runs every test. Both create
# .venv and install requirements.txt into it on first use. CONTRIBUTING.md
# says which target to run after which change.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-requirements

.PHONY: setup book book-strict test lint generate generate-check execute dot \
        bench versions clean student lint-workflows publish-dry-run study \
        lighthouse

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

# Every file written from another: setup cells and helper copies in the
# chapters, the student edition, the tables under book/_generated.
generate: setup
	$(PY) -m tools.generate

# Fails, naming the files, if a generated file differs from what
# `make generate` would write (a copy edited by hand, a source edited alone).
generate-check: setup
	$(PY) -m tools.generate --check

# torchviz needs graphviz's `dot` to draw graphs when the chapters run.
dot:
	@command -v dot >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null; \
	  else \
	    echo "graphviz's 'dot' is missing: install it (Debian/Ubuntu: sudo apt-get install graphviz) and run 'make test' again." >&2; \
	    exit 1; \
	  fi; }

# Stored outputs are compared digit for digit, and PyTorch's CPU kernels round
# differently on AVX2 and AVX-512 machines (chapter 5's training shifts by a
# test image or two). The notebooks are executed, and compared, with the
# kernels held at the AVX2 level that every x86-64 machine of today has.
# The variables live in tools/book.py (CPU_KERNELS); expanded when a recipe runs.
CPU_KERNELS = $(shell $(PY) -m tools.book --cpu-kernels)
ALONE := _build/alone
NOTEBOOKS = $(shell $(PY) -m tools.book)

# Every test, on both cores: nbval (strict) over a copy of each chapter in a
# folder of its own (so each runs alone, as in Colab; tests/conftest.py fails
# the run if one writes a file there), and every test in tests/ (the browser
# test reads the book that `book` builds).
test: setup dot book
	rm -rf $(ALONE)
	for notebook in $(NOTEBOOKS); do \
	  name=$$(basename $$notebook .ipynb); mkdir -p $(ALONE)/$$name; \
	  cp $$notebook $(ALONE)/$$name/; done
	$(CPU_KERNELS) $(PY) -m pytest -n 2 --dist loadfile --durations=12 \
	  --nbval --nbval-current-env --nbval-cell-timeout=300 \
	  --nbval-sanitize-with tests/sanitize.cfg \
	  $(ALONE)/*/*.ipynb tests/

# ruff over the Python files and the notebooks (settings in pyproject.toml).
lint: setup
	$(VENV)/bin/ruff check .

# Re-run chapters and store their new outputs (after editing one):
#   make execute NOTEBOOKS_TO_RUN="book/04_every_way_out.ipynb"
NOTEBOOKS_TO_RUN ?= $(NOTEBOOKS)
execute: setup dot
	$(CPU_KERNELS) $(PY) -m tools.run --write $(NOTEBOOKS_TO_RUN)
	$(PY) -m tools.generate

# The pruning study: every comparison of chapters 5 and 7 over many seeds
# (tools/study.py), at the CPU-kernel level of the stored outputs, cached
# and resumable; then the chapters' stored-study cells are regenerated.
study: setup
	$(CPU_KERNELS) nice -n 5 $(PY) -m tools.study
	$(PY) -m tools.generate

# Lighthouse (pinned in package.json and package-lock.json; needs Node 20 and
# npm) with the system Chromium: every page of the book and a fresh
# `jupyter-book create` template, both served with gzip, three runs per page,
# medians and ratios to the template in _build/lighthouse.md. Timings depend
# on the machine's load: not part of `make test`.
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

lighthouse: book node_modules/.package-lock.json
	nice $(PY) -m tools.lighthouse

# Inference speed of dense vs pruned models (timings: not part of `make test`).
bench: setup
	$(PY) -m benchmarks.tnvp_speed

# Every chapter run alone on each torch release of torch_releases.txt (one
# venv under ../venvs, moved from release to release, removed at the end
# unless KEEP=1; VERSIONS="2.5.1 2.9.1" picks a subset), then facts read from
# each release's wheel; both write files under book/_generated that
# book/versions.md includes. Cached by the chapters' code and the pins
# installed: a rerun only runs what changed.
versions: setup
	nice -n 10 $(PY) -m tools.versions
	nice -n 10 $(PY) -m tools.wheel_facts

# The student edition is generated with everything else.
student: generate

clean:
	rm -rf _build

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

# Grade a class with nbgrader (tools/grade.py): SUBMISSIONS is a folder with
# one sub-folder per student, each holding any of the student notebooks.
# Writes SUBMISSIONS/grades.csv and SUBMISSIONS/feedback/STUDENT.md; each
# notebook runs on a copy, in a scratch folder, under time-outs: a whole
# notebook GRADE_TIMEOUT seconds, one cell GRADE_CELL_TIMEOUT seconds.
.PHONY: grade
SUBMISSIONS ?=
GRADE_TIMEOUT ?= 600
GRADE_CELL_TIMEOUT ?= 120
grade: setup
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=folder" >&2; exit 2; }
	$(PY) -m tools.grade "$(SUBMISSIONS)" --timeout $(GRADE_TIMEOUT) \
	  --cell-timeout $(GRADE_CELL_TIMEOUT)

# The class site (tools/sites.py): the student notebooks, the before-class
# page, the Colab page and the worksheets, nothing with an answer, as a Jupyter
# Book of its own in _build/class/html; the Pages workflow publishes it at
# /class/ beside the book.
.PHONY: class-site teacher-pack
class-site: setup
	$(PY) -m tools.sites class-site

# The teacher's pack (tools/sites.py): the teacher's guide, logistics, teaching
# notes, assessment and answers, the run sheets and each chapter's slides
# (reveal.js from node_modules: `npm ci`), every page `noindex`, in
# _build/teacher-pack.zip; the release workflow attaches it to each release.
teacher-pack: setup node_modules/.package-lock.json
	$(PY) -m tools.sites teacher-pack

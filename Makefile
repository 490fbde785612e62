# `make book` builds the HTML book, `make test` runs every test, `make ci`
# runs every check of CI. Each creates .venv and installs requirements.txt
# into it on first use. CONTRIBUTING.md says which target to run after which
# change; `make help` lists the targets, from the `## ` note after each name.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-requirements

.PHONY: help setup book book-strict test test-only lint generate generate-check versions-check \
        execute dot bench versions clean student lint-workflows publish-dry-run \
        study study-check ci ci-checks floor clean-floor pdf notebooks-zip

help: ## this list: every target, with what it does
	@awk -F ':[^#]*## ' '/^[a-z][a-z-]*:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

setup: $(STAMP) ## create .venv and install requirements.txt into it

# TORCH_INDEX=https://download.pytorch.org/whl/cpu installs requirements.txt's
# torch from that index first (the CPU build, not PyPI's multi-GB CUDA build).
TORCH_INDEX ?=

# The packages are installed by uv (pinned in requirements.txt, installed by
# pip first), with pip's own configuration carried over (tools/uv_setup.py):
# a minute faster than pip on every fresh clone.
$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip "$$(grep '^uv==' requirements.txt)"
	$(if $(TORCH_INDEX),$(PY) -m tools.uv_setup $(PY) "$$(grep '^torch==' requirements.txt)" --index-url $(TORCH_INDEX))
	$(PY) -m tools.uv_setup $(PY) -r requirements.txt
	@touch $@

# Builds from the outputs stored in the notebooks: no graphviz needed.
book: setup ## build the HTML book under _build/html
	$(VENV)/bin/jupyter-book build --quiet .
	@echo "Book: $(CURDIR)/_build/html/index.html"

# The book to take away (tools/downloads.py), into the built site's
# downloads folder (_config.yml's book_downloads), which every page links:
# a PDF of each page and of the whole book (cover, contents, outline),
# printed by the system Chromium with every fold open; and a zip of the
# notebooks, both editions. The Pages workflow runs both after the book.
pdf: book ## a PDF of the whole book and of each page, with the system Chromium
	$(PY) -m tools.downloads pdf

notebooks-zip: setup ## a zip of the notebooks, with answers and the student edition
	$(PY) -m tools.downloads zip

# The same, with every Sphinx warning an error (used by CI).
book-strict: setup ## build the whole book, every Sphinx warning an error
	$(VENV)/bin/jupyter-book build --all --warningiserror --keep-going --quiet .
	@echo "Book: $(CURDIR)/_build/html/index.html"

# Every file written from another: setup cells and helper copies in the
# chapters, the student edition, the tables under book/_generated (which
# holds nothing else: `generate-check` fails on a file there that no
# generator writes; what is measured is kept in book/_data).
generate: setup ## write every generated file (copies, student edition, tables)
	$(PY) -m tools.generate

# Fails, naming the files, if a generated file differs from what
# `make generate` would write (a copy edited by hand, a source edited alone).
generate-check: setup ## fail if a generated file differs from what `make generate` writes
	$(PY) -m tools.generate --check

# torchviz needs graphviz's `dot` to draw graphs when the chapters run.
dot: ## install graphviz's `dot` if it is missing (as root), or say how
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

# Every test, on three workers: nbval (strict) over a copy of each chapter in a
# folder of its own (so each runs alone, as in Colab; tests/conftest.py fails
# the run if one writes a file there), and every test in tests/ (the browser
# test reads the book that `book` builds). Each notebook, and each test
# file, stays on one worker (--dist loadfile), but tests/conftest.py spreads
# the browser test's page views over all and sends the longest files first
# (--no-loadscope-reorder keeps the order it gives). One thread each
# (OMP_NUM_THREADS=1, as the chapters' setup cells set). Three workers on a
# two-core machine: much of the tests' time is spent waiting (a kernel or a
# browser starting, a time-out running out, a subprocess), and the third
# fills those waits; on 2 cores with another grading run beside it, CI took
# 462 s with three workers and 450-495 s with two.
# TESTS picks a part: all (the default: `make test`, `make ci`, .ci/run);
# site, the tests of the built book, of Chromium, axe-core and the grader's
# sandbox, which do not depend on Python's version (GitHub runs them on one
# Python); python, nbval over the chapters and every other file of tests/
# (GitHub runs them on each Python). A file that reads _build/html or starts
# Chromium belongs in SITE_TESTS (tests/test_workflows.py checks).
TESTS ?= all
SITE_TESTS := tests/test_browser.py tests/test_icons_browser.py tests/test_triage_browser.py \
  tests/test_handouts.py tests/test_downloads.py tests/test_findable.py tests/test_links.py \
  tests/test_teacher_pack.py tests/test_grade.py
TEST_PATHS_all := $(ALONE)/*/*.ipynb tests/
TEST_PATHS_python := $(TEST_PATHS_all) $(SITE_TESTS:%=--ignore=%)
TEST_PATHS_site := $(SITE_TESTS)
define run-tests
rm -rf $(ALONE)
for notebook in $(NOTEBOOKS); do \
  name=$$(basename $$notebook .ipynb); mkdir -p $(ALONE)/$$name; \
  cp $$notebook $(ALONE)/$$name/; done
$(CPU_KERNELS) OMP_NUM_THREADS=1 $(PY) -m pytest -n 3 --dist loadfile --no-loadscope-reorder \
  --durations=12 --nbval --nbval-current-env --nbval-cell-timeout=300 \
  --nbval-kernel-startup-timeout=300 \
  --nbval-sanitize-with tests/sanitize.cfg \
  $(or $(TEST_PATHS_$(TESTS)),$(error TESTS=$(TESTS): give all, site or python))
endef

test: setup dot book ## every test: nbval over each chapter alone, and tests/ (builds the book first)
	$(run-tests)

test-only: setup dot ## the tests of `make test` on the book as built (TESTS=site or python: a part)
	$(run-tests)

# ruff over the Python files and the notebooks (settings in pyproject.toml).
lint: setup ## ruff over the Python files and the notebooks
	$(VENV)/bin/ruff check .

# Re-run chapters and store their new outputs (after editing one):
#   make execute NOTEBOOKS_TO_RUN="book/04_every_way_out.ipynb"
NOTEBOOKS_TO_RUN ?= $(NOTEBOOKS)
execute: setup dot ## re-run chapters and store their outputs (NOTEBOOKS_TO_RUN=...)
	$(CPU_KERNELS) $(PY) -m tools.run --write $(NOTEBOOKS_TO_RUN)
	$(PY) -m tools.generate

# The pruning study: every comparison of chapters 5 and 7 over many seeds
# (tools/study.py), at the CPU-kernel level of the stored outputs, cached
# and resumable; then the chapters' stored-study cells are regenerated.
study: setup ## the pruning study of chapters 5 and 7 over many seeds (cached)
	$(CPU_KERNELS) nice -n 5 $(PY) -m tools.study
	$(PY) -m tools.generate

# The study's verdicts on seeds it never stored: 10 new seeds per chapter
# (cached beside the study, in book/_data/study/*.new_seeds.json); fails
# if a verdict changes direction (lower <-> higher) on them, alone or pooled.
study-check: setup ## rerun the study on 10 new seeds; fail if a verdict flips
	$(CPU_KERNELS) nice -n 5 $(PY) -m tools.study --check
	$(PY) -m tools.generate

# reveal.js for the teacher pack's offline slides (pinned in package.json and
# package-lock.json; needs Node 20 and npm).
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

# Inference speed of dense vs pruned models, and what TNVP's statistics add
# to training (timings: not part of `make test`). The overhead is stored in
# book/_data/bench/ and written into chapter 5 by `make generate`.
bench: setup ## inference speed of dense vs pruned models; the statistics' overhead, stored
	$(PY) -m benchmarks.tnvp_speed
	$(PY) -m tools.generate

# Every chapter run alone on each torch release of torch_releases.txt (one
# venv under ../venvs, moved from release to release, removed at the end
# unless KEEP=1; VERSIONS="2.5.1 2.9.1" picks a subset), then facts read from
# each release's wheel; both keep what they measured in book/_data and write
# the tables under book/_generated that book/versions.md includes. Cached by the chapters' code and the pins
# installed: a rerun only runs what changed.
versions: setup ## every chapter alone on each supported torch release (long)
	nice -n 10 $(PY) -m tools.versions
	nice -n 10 $(PY) -m tools.wheel_facts

versions-check: setup ## fail while a stored versions result is stale (run on older code or pins)
	$(PY) -m tools.versions --check

# The student edition is generated with everything else.
student: generate ## the student edition (written by `make generate`)

clean: ## remove _build
	rm -rf _build

clean-floor: ## remove the torch floor's venv from the machine's cache
	rm -rf $(FLOOR_DIR)

# The GitHub workflows (and Dependabot's configuration), checked offline:
# fails on any actionlint error and on any zizmor finding of medium severity
# or more (an action not pinned by commit hash, broad permissions, a checkout
# that keeps its token, ...). GITHUB_DIR=path checks another copy.
GITHUB_DIR ?= .github

lint-workflows: setup ## actionlint and zizmor over the GitHub workflows
	$(VENV)/bin/actionlint $(GITHUB_DIR)/workflows/*.yml
	$(VENV)/bin/zizmor --offline --min-severity medium $(GITHUB_DIR)

# CI, the one definition: .ci/run (after installing graphviz and Chromium)
# runs `make ci`; GitHub's test workflow runs its parts, each once, in jobs
# of their own (.github/workflows/test.yml says which). Two jobs at once:
#   ci-checks: ruff, the generated files, the workflows, the book with every
#     Sphinx warning an error, then every test on that book (not built again);
#   floor: every chapter alone on the oldest supported torch; its venv is
#     built (downloaded) from the start, and it runs niced, on what the
#     others leave idle (the book's build uses one core; the tests' tail).
# Each part prints its time, and `ci` the total.
ci: setup dot ## every check of CI, as .ci/run runs it (GitHub runs its parts apart)
	@start=$$(date +%s); status=0; \
	$(MAKE) --no-print-directory -j2 ci-checks floor || status=$$?; \
	echo "ci: make ci took $$(( $$(date +%s) - start )) s$$([ $$status = 0 ] || echo ', and FAILED')"; \
	exit $$status

# $(call timed,NAME,TARGET): make TARGET, then print how long it took.
timed = start=$$(date +%s); $(MAKE) --no-print-directory $(2) && \
	echo "ci: $(1) took $$(( $$(date +%s) - start )) s"

# (No prerequisite of its own: under make -j, one with a recipe, such as
# dot, would hold ci-checks back until `floor` ends; each part has its own.)
ci-checks: ## `make ci` but the floor: its checks, one after the other
	+@$(call timed,ruff,lint)
	+@$(call timed,generated files,generate-check)
	+@$(call timed,workflows (actionlint and zizmor),lint-workflows)
	+@$(call timed,book with warnings as errors,book-strict)
	+@$(call timed,tests,test-only)

# Every chapter alone on the oldest supported torch (the first line of
# torch_releases.txt), from PyPI as a reader installs it (or from
# TORCH_INDEX), in a venv of the machine's cache, outside the clone
# (tools/versions.py; no earlier result is reused). The venv, several GB
# (a CUDA build of torch with its nvidia-* wheels), is built from nothing the
# first time and kept for the next run and the next clone, which only check
# it, as pip keeps its own cache; `make clean-floor` removes it. FLOOR_DIR=
# moves it. Its logs are printed when it ends.
FLOOR_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/pruning-book/floor
# (read once, when first used)
FLOOR = $(eval FLOOR := $$(shell $$(PY) -m tools.book --floor))$(FLOOR)
FLOOR_ARGS = --venv-root $(FLOOR_DIR)/venvs --results $(FLOOR_DIR)/results.json \
             --table $(FLOOR_DIR)/matrix.md --min-free-gb 8

floor: setup ## every chapter alone on the oldest supported torch (venv in the machine cache)
	@rm -rf $(FLOOR_DIR)/results.json $(FLOOR_DIR)/matrix.md $(FLOOR_DIR)/*.log
	@mkdir -p $(FLOOR_DIR)
	@start=$$(date +%s); \
	nice -n 10 $(PY) -m tools.versions --versions $(FLOOR) $(FLOOR_ARGS) --prepare \
	  > $(FLOOR_DIR)/prepare.log 2>&1 || { cat $(FLOOR_DIR)/prepare.log; \
	  echo "ci: the torch $(FLOOR) venv could not be built" >&2; exit 1; }; \
	echo "ci: torch $(FLOOR) venv took $$(( $$(date +%s) - start )) s"; start=$$(date +%s); \
	status=0; nice -n 10 $(PY) -m tools.versions --versions $(FLOOR) $(FLOOR_ARGS) --strict --keep \
	  > $(FLOOR_DIR)/run.log 2>&1 || status=$$?; \
	cat $(FLOOR_DIR)/run.log; cat $(FLOOR_DIR)/matrix.md 2>/dev/null || true; \
	echo "ci: torch $(FLOOR) floor took $$(( $$(date +%s) - start )) s$$([ $$status = 0 ] || echo ', and FAILED')"; \
	exit $$status

# The Pages workflow's build job, run here on a scratch copy of HEAD with
# REPOSITORY as GitHub sets it; then the built site is checked: Colab badges,
# launch buttons and repository button point at REPOSITORY, every local link
# resolves, and the placeholder guard stops a build without REPOSITORY
# (tools/publish.py).
REPOSITORY ?= someone/pruning-book

publish-dry-run: setup ## the Pages workflow's build on a scratch copy, then its site checked
	$(PY) -m tools.publish --repository $(REPOSITORY)

# Grade a class (tools/grade.py): SUBMISSIONS is a folder with one sub-folder
# per student, each holding any of the student notebooks; ROSTER, a CSV
# (id, folder and/or email) mapping each folder to the student's id. Writes
# SUBMISSIONS/grades.csv and SUBMISSIONS/feedback/STUDENT.md. Each notebook
# runs in a bubblewrap sandbox (no network, nothing writable but its own
# scratch folder, every process killed with it, as the user nobody when run
# as root) and hands back data; a reference run of the book's solutions, in
# a sandbox of its own, and the grader's own process give the points. Time-
# outs: a whole notebook GRADE_TIMEOUT seconds, one cell GRADE_CELL_TIMEOUT
# seconds; its address space is limited to GRADE_MEMORY_MB. What was graded
# is kept in SUBMISSIONS/.grading and not run again; REGRADE=1 runs it again.
.PHONY: grade bench-grade
SUBMISSIONS ?=
ROSTER ?=
REGRADE ?=
GRADE_TIMEOUT ?= 600
GRADE_CELL_TIMEOUT ?= 120
GRADE_MEMORY_MB ?= 6000
grade: setup ## grade a class, each notebook sandboxed (SUBMISSIONS=folder ROSTER=roster.csv)
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=folder [ROSTER=roster.csv]" >&2; exit 2; }
	$(PY) -m tools.grade "$(SUBMISSIONS)" --timeout $(GRADE_TIMEOUT) \
	  --cell-timeout $(GRADE_CELL_TIMEOUT) --memory-mb $(GRADE_MEMORY_MB) \
	  $(if $(ROSTER),--roster "$(ROSTER)") $(if $(REGRADE),--regrade)

# How long grading 30 students x lesson 1's three notebooks takes here.
bench-grade: setup ## time `make grade` on a class of 30 x 3 notebooks, then resumed
	$(PY) -m benchmarks.grading_speed

# The class site (tools/sites.py): the student notebooks, the before-class
# page, the Colab page and the worksheets, nothing with an answer, as a Jupyter
# Book of its own in _build/class/html; the Pages workflow publishes it at
# /class/ beside the book.
.PHONY: class-site teacher-pack
class-site: setup ## the class site: student notebooks and handouts, no answers (_build/class/html)
	$(PY) -m tools.sites class-site

# The teacher's pack (tools/sites.py): the teacher's guide, logistics, teaching
# notes, assessment and answers, the run sheets and each chapter's slides
# (reveal.js from node_modules: `npm ci`), every page `noindex`, in
# _build/teacher-pack.zip; the release workflow attaches it to each release.
teacher-pack: setup node_modules/.package-lock.json ## the teacher's pack: guide, run sheets, slides, answers (_build/teacher-pack.zip)
	$(PY) -m tools.sites teacher-pack

"""The GitHub workflows that test and publish the book, checked here.

Also what the published book says about its reuse: the licenses, and the
citation written from CITATION.cff.
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tools import citation, publish
from tools.book import ROOT, toc_notebooks, torch_pin, torch_releases

WORKFLOWS = ROOT / ".github" / "workflows"
# The Citation File Format's schema 1.2.0, as cffconvert 2.0.0 ships it
# (cffconvert --validate checks CITATION.cff against it; cffconvert itself
# needs jsonschema<4, which cannot be installed beside the book's packages).
CFF_SCHEMA = ROOT / "tests" / "data" / "citation-file-format-1.2.0.schema.json"
PINNED = re.compile(r"[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+")


def workflow(name):
    return yaml.safe_load((WORKFLOWS / name).read_text())


def steps(flow):
    return [step for job in flow["jobs"].values() for step in job.get("steps", [])]


def uses_lines():
    """Every `uses:` line of every workflow, as written (with its comment)."""
    return [line.split("uses:", 1)[1].strip()
            for path in sorted(WORKFLOWS.glob("*.yml"))
            for line in path.read_text().splitlines() if "uses:" in line]


# --- the address the Pages workflow publishes from ----------------------------

ADDRESS_FILES = ["_config.yml", "CITATION.cff", "book/_generated/how_to_cite.md"]


def pages_address_step():
    build = workflow("pages.yml")["jobs"]["build"]["steps"]
    names = [step.get("name", "") for step in build]
    index = next(i for i, name in enumerate(names) if "repository's address" in name)
    assert names[index + 1] == "Build the book", "the address is set before the build"
    return build[index]


def run_pages_address_step(tmp_path, repository, config_text=None):
    """Run the workflow's address step on copies of the files it edits."""
    step = pages_address_step()
    assert step["env"]["REPOSITORY"] == "${{ github.repository }}"
    for name in ADDRESS_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    if config_text is not None:
        (tmp_path / "_config.yml").write_text(config_text)
    done = publish.run_step(step, tmp_path, repository,
                            environ={"PATH": os.environ["PATH"]})
    return done, yaml.safe_load((tmp_path / "_config.yml").read_text())


def test_pages_workflow_publishes_with_the_repository_it_runs_in(tmp_path):
    done, config = run_pages_address_step(tmp_path, "someone/pruning-book")
    assert done.returncode == 0, done.stderr
    assert config["repository"]["url"] == "https://github.com/someone/pruning-book"
    cff = yaml.safe_load((tmp_path / "CITATION.cff").read_text())
    assert cff["repository-code"] == "https://github.com/someone/pruning-book"
    cite = (tmp_path / "book/_generated/how_to_cite.md").read_text()
    assert "https://github.com/someone/pruning-book" in cite
    for name in ADDRESS_FILES:
        assert "YOUR-" not in (tmp_path / name).read_text(), name


def test_pages_workflow_refuses_to_publish_a_placeholder(tmp_path):
    done, _ = run_pages_address_step(tmp_path, "")
    assert done.returncode != 0
    # an address the step cannot replace (not on the url line) still stops it
    stray = (ROOT / "_config.yml").read_text() + "# see YOUR-ACCOUNT/YOUR-REPOSITORY\n"
    done, _ = run_pages_address_step(tmp_path, "someone/pruning-book", stray)
    assert done.returncode != 0 and "placeholder" in done.stderr


def test_pages_publishes_only_what_passed_every_test_on_main():
    """pages.yml builds _build/html and deploys it, only when test.yml calls
    it: on `main`, after every other job of that run (that commit) passed."""
    pages = workflow("pages.yml")
    assert pages[True] == {"workflow_call": None}
    assert pages["jobs"]["build"]["steps"][-1]["with"]["path"] == "_build/html"
    assert pages["jobs"]["deploy"]["needs"] == "build"
    assert pages["jobs"]["deploy"]["steps"][0]["uses"].startswith("actions/deploy-pages@")
    callers = [(path.name, name) for path in WORKFLOWS.glob("*.yml")
               for name, job in workflow(path.name)["jobs"].items()
               if "pages.yml" in job.get("uses", "")]
    assert callers == [("test.yml", "pages")]
    jobs = workflow("test.yml")["jobs"]
    assert jobs["pages"]["uses"] == "./.github/workflows/pages.yml"
    assert sorted(jobs["pages"]["needs"]) == sorted(set(jobs) - {"pages"})
    assert jobs["pages"]["if"] == "github.ref == 'refs/heads/main'"


def test_pages_workflow_builds_with_make():
    """`make book`, as a local build, after `make generate` (the notebooks'
    links to the book's pages are made from the address), its PDFs and
    notebooks' zip (which every page links), and the class
    site copied to /class/ inside it; besides the address, no step of its
    own."""
    build = workflow("pages.yml")["jobs"]["build"]["steps"]
    runs = [s for s in build if "run" in s]
    assert runs == [pages_address_step(), next(s for s in build
                                               if s.get("name") == "Build the book")]
    assert runs[-1]["run"].strip().splitlines() == [
        "make generate book pdf notebooks-zip class-site",
        "cp -r _build/class/html _build/html/class"]
    actions = [s["uses"].split("@")[0] for s in build if "uses" in s]
    assert actions == ["actions/checkout", "actions/setup-python",
                       "actions/upload-pages-artifact"]


# --- the facts the workflows read, not restate --------------------------------

def test_release_workflow_attaches_the_teacher_pack():
    """Only the release job may write, and only to the release."""
    release = workflow("release.yml")
    assert release[True] == {"release": {"types": ["published"]}}   # YAML reads `on` so
    assert release["permissions"] == {"contents": "read"}
    [job] = release["jobs"].values()
    assert job["permissions"] == {"contents": "write"}
    runs = [s["run"] for s in job["steps"] if "run" in s]
    assert any("make generate teacher-pack" in r for r in runs)
    assert any(r.startswith("gh release upload ") and "_build/teacher-pack.zip" in r
               for r in runs)


def test_workflows_read_the_torch_pin_and_releases_from_their_files():
    for path in WORKFLOWS.glob("*.yml"):
        text = path.read_text()
        assert torch_pin() not in text, path.name
        assert not any(re.search(rf"\b{re.escape(r)}\b", text)
                       for r in torch_releases()), path.name
    # torch from PyTorch's CPU index, through the Makefile (requirements.txt's pin)
    for flow in (workflow("test.yml"), workflow("pages.yml")):
        made = [s for s in steps(flow)
                if re.match(r"make (generate )?(test|book|ci)\b", s.get("run", ""))]
        assert made and any("whl/cpu" in s.get("env", {}).get("TORCH_INDEX", "")
                            for s in made)
    makefile = (ROOT / "Makefile").read_text()
    assert "grep '^torch==' requirements.txt" in makefile


def test_the_release_matrix_is_torch_releases_txt(tmp_path):
    test = workflow("test.yml")
    versions = test["jobs"]["versions"]
    assert versions["needs"] == "releases"
    assert versions["strategy"]["matrix"]["torch"] == \
        "${{ fromJSON(needs.releases.outputs.torch) }}"
    releases = test["jobs"]["releases"]
    assert releases["outputs"]["torch"] == "${{ steps.list.outputs.torch }}"
    step = next(s for s in releases["steps"] if s.get("id") == "list")
    # the step, here (its pip install of pyyaml left out: the venv has it)
    script = "\n".join(line for line in step["run"].splitlines() if "pip install" not in line)
    output = tmp_path / "output"
    subprocess.run(["bash", "-e", "-c", script], cwd=ROOT, check=True,
                   env={**os.environ, "GITHUB_OUTPUT": str(output),
                        "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"})
    name, value = output.read_text().strip().split("=", 1)
    assert name == "torch" and json.loads(value) == torch_releases()


def test_every_chapter_alone_on_each_release_runs_tools_versions():
    run = next(s["run"] for s in workflow("test.yml")["jobs"]["versions"]["steps"]
               if "tools.versions" in s.get("run", ""))
    assert "python -m tools.versions" in run
    for flag in ("--versions", "--torch-index", "--min-free-gb 4", "--venv-root",
                 "--results", "--table", "--strict"):
        assert flag in run, flag


def test_tests_run_on_the_pythons_readers_have():
    test = workflow("test.yml")["jobs"]["tests"]
    assert test["strategy"]["matrix"]["python"] == ["3.11", "3.12", "3.13"]
    setup = next(s for s in test["steps"] if s.get("uses", "").startswith("actions/setup-python@"))
    assert setup["with"]["python-version"] == "${{ matrix.python }}"


# --- every chapter alone in Colab's runtime ------------------------------------

COLAB_IMAGE = "us-docker.pkg.dev/colab-images/public/runtime"
DIGEST = "sha256:" + "0123456789abcdef" * 4
# A stand-in for `docker` (no Docker engine here): it logs its arguments, one
# JSON list a line; `run ... -m tools.book` runs tools.book with this Python;
# `run ... -m tools.run NOTEBOOK` fails for the notebooks named in FAIL;
# `buildx imagetools inspect` prints MANIFEST.
FAKE_DOCKER = """#!{python}
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["DOCKER_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:3] == ["buildx", "imagetools", "inspect"]:
    print(os.environ["MANIFEST"])
elif args[0] == "run" and "-m" in args:
    module = args[args.index("-m") + 1]
    if module == "tools.book":
        sys.exit(subprocess.run([sys.executable, "-m", "tools.book"]).returncode)
    if module == "tools.run":
        notebook = args[args.index("-m") + 2]
        sys.exit(1 if notebook in os.environ.get("FAIL", "").split() else 0)
"""


def colab_job():
    return workflow("colab.yml")["jobs"]["chapters"]


def colab_step(name=None, step_id=None):
    return next(s for s in colab_job()["steps"]
                if (name and s.get("name") == name) or (step_id and s.get("id") == step_id))


def run_colab_step(step, tmp_path, **env):
    """Run a `run:` step of the Colab job here, in the repository's root,
    with the job's and the step's environment and the stand-in docker."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER.format(python=sys.executable))
    docker.chmod(0o755)
    log, output, summary = (tmp_path / n for n in ("docker.log", "output", "summary"))
    environ = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "DOCKER_LOG": str(log),
               "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary),
               **colab_job()["env"], **env}
    for name, value in (step.get("env") or {}).items():
        if name not in env:
            raise AssertionError(f"the test must give {name} ({value})")
    done = subprocess.run(publish.shell_command(step) + [step["run"]], cwd=ROOT,
                          env=environ, text=True, capture_output=True)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done, calls, output


def test_colab_job_runs_every_chapter_alone_in_colabs_image(tmp_path):
    step = colab_step("Every chapter alone in Colab's runtime")
    done, calls, _ = run_colab_step(step, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    image = colab_job()["env"]["LOCAL_IMAGE"]
    chapters = [str(p.relative_to(ROOT)) for p in toc_notebooks()]
    runs = [call for call in calls if "tools.run" in call]
    # one fresh container per chapter, in the toc's order
    assert [call[-1] for call in runs] == chapters
    for call in calls:
        assert call[:2] == ["run", "--rm"], call
        assert call[call.index("--entrypoint") + 1] == "python3", call
        assert f"{ROOT}:/book:ro" in call and image in call, call
    for chapter in chapters:
        assert f"{chapter}: pass" in done.stdout


def test_colab_job_fails_on_a_failing_chapter_but_runs_the_others(tmp_path):
    step = colab_step("Every chapter alone in Colab's runtime")
    chapters = [str(p.relative_to(ROOT)) for p in toc_notebooks()]
    done, calls, _ = run_colab_step(step, tmp_path, FAIL=chapters[1])
    assert done.returncode != 0
    assert [call[-1] for call in calls if "tools.run" in call] == chapters
    assert f"{chapters[1]}: FAIL" in done.stdout
    assert "chapters failed in Colab's runtime: 1" in done.stdout


def test_colab_job_installs_nothing_the_chapters_do_not():
    """Colab's Python and packages as they are: the chapters' first cells
    install the rest."""
    for step in colab_job()["steps"]:
        assert not step.get("uses", "").startswith("actions/setup-python@")
        run = step.get("run", "")
        assert "requirements" not in run and "pip" not in run, step.get("name")


def test_colab_image_is_pulled_by_its_digest(tmp_path):
    job, step = colab_job(), colab_step(step_id="image")
    assert job["env"]["IMAGE"] == COLAB_IMAGE
    manifest = json.dumps({"mediaType": "application/vnd.oci.image.index.v1+json",
                           "digest": DIGEST, "size": 1234})
    done, calls, output = run_colab_step(step, tmp_path, MANIFEST=manifest)
    assert done.returncode == 0, done.stderr
    assert calls == [["buildx", "imagetools", "inspect", f"{COLAB_IMAGE}:latest",
                      "--format", "{{json .Manifest}}"]]
    assert output.read_text() == f"digest={DIGEST}\n"
    # the text format instead of JSON, or JSON without a digest: no key
    done, _, _ = run_colab_step(step, tmp_path, MANIFEST="MediaType: something else")
    assert done.returncode != 0
    done, _, _ = run_colab_step(step, tmp_path, MANIFEST='{"mediaType": "x"}')
    assert done.returncode != 0 and "no digest" in done.stderr


def test_colab_image_is_cached_by_its_digest(tmp_path):
    steps = colab_job()["steps"]
    restore = colab_step(step_id="cache")
    save = next(s for s in steps if s.get("uses", "").startswith("actions/cache/save@"))
    assert restore["uses"].startswith("actions/cache/restore@")
    key = "colab-runtime-${{ steps.image.outputs.digest }}"
    assert restore["with"] == save["with"] == {"path": "${{ env.ARCHIVE }}", "key": key}
    assert save["if"] == "steps.cache.outputs.cache-hit != 'true'"
    # restored, then saved, before the chapters run
    names = [s.get("name") or s.get("id") or s["uses"] for s in steps]
    assert (steps.index(restore) < steps.index(save)
            < names.index("Every chapter alone in Colab's runtime"))
    load = colab_step("The image, from the cache or pulled by digest")
    assert load["env"] == {"DIGEST": "${{ steps.image.outputs.digest }}",
                           "HIT": "${{ steps.cache.outputs.cache-hit }}"}
    assert colab_job()["env"]["ARCHIVE"].startswith("/mnt/")  # the runner's larger disk
    archive, local = tmp_path / "runtime.tar", colab_job()["env"]["LOCAL_IMAGE"]
    inspect = ["image", "inspect", "--format", "{{.Id}} {{.Size}} bytes", local]
    # a hit loads the archive, then deletes it to make room; a miss pulls by
    # digest and writes the archive that actions/cache/save keeps
    archive.write_text("")
    (tmp_path / "hit").mkdir()
    done, calls, _ = run_colab_step(load, tmp_path / "hit", DIGEST=DIGEST, HIT="true",
                                    ARCHIVE=str(archive))
    assert done.returncode == 0, done.stderr
    assert calls == [["load", "--input", str(archive)], inspect]
    assert not archive.exists()
    (tmp_path / "miss").mkdir()
    done, calls, _ = run_colab_step(load, tmp_path / "miss", DIGEST=DIGEST, HIT="false",
                                    ARCHIVE=str(archive))
    assert done.returncode == 0, done.stderr
    assert calls == [["pull", f"{COLAB_IMAGE}@{DIGEST}"],
                     ["tag", f"{COLAB_IMAGE}@{DIGEST}", local],
                     ["save", "--output", str(archive), local], inspect]


# --- CI: one definition, `make ci` --------------------------------------------

def make(*args):
    done = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(ROOT), *args],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def make_commands(text):
    """The `make ...` commands a shell script runs (comments left out)."""
    lines = [line.split("#")[0] for line in text.splitlines()]
    return [m[0].strip() for line in lines for m in re.finditer(r"\bmake\b[^;&|)]*", line)]


def test_ci_run_runs_make_ci():
    """.ci/run installs the system packages, then runs `make ci` and no
    other target."""
    run = (ROOT / ".ci" / "run").read_text()
    assert make_commands(run) == ["make ci"], make_commands(run)


def job_commands(job):
    return [c for s in job.get("steps", []) if "run" in s for c in make_commands(s["run"])]


def pytest_paths(tests):
    """What `make test-only TESTS=tests` gives pytest to collect."""
    dry = make("-n", "test-only", f"TESTS={tests}").splitlines()
    return next(line for line in dry if " -m pytest " in line).split("sanitize.cfg")[1].split()


# what a test file needs that is the same on every Python: the built book, a
# browser (conftest's session fixtures `browser` and `site`), the grader
SITE_NEEDS = re.compile(r'CHROMIUM|_build" / "html"|_build/html/|tools import grade\b'
                        r'|def \w+\([^)]*\b(?:browser|site)\b')


def test_github_runs_each_part_of_make_ci_once():
    """`make ci` = ci-checks (its tests: TESTS=all) + floor. GitHub: `checks`
    runs ci-checks with the tests of TESTS=site on one Python, `tests` those
    of TESTS=python on each, and `versions` the floor (one release of its
    matrix): TESTS=site and TESTS=python split TESTS=all between them."""
    jobs = workflow("test.yml")["jobs"]
    assert job_commands(jobs["checks"]) == ["make ci-checks TESTS=site"]
    assert "matrix" not in jobs["checks"].get("strategy", {})
    assert job_commands(jobs["tests"]) == ["make test-only TESTS=python"]
    every, site, python = (pytest_paths(t) for t in ("all", "site", "python"))
    assert every == ["_build/alone/*/*.ipynb", "tests/"]
    assert python == every + [f"--ignore={path}" for path in site]
    files = {f"tests/{p.name}" for p in (ROOT / "tests").glob("test_*.py")
             if p.name != Path(__file__).name}
    assert set(site) <= files and len(set(site)) == len(site)
    needs_site = {f for f in files if SITE_NEEDS.search((ROOT / f).read_text())}
    assert needs_site == set(site), "SITE_TESTS in the Makefile: the files that need the site"


def test_the_floor_runs_in_one_job():
    """Every chapter on a torch release (the floor among them): only the
    versions matrix, none of `make ci` (which runs the floor) elsewhere."""
    running = [(path.name, name) for path in WORKFLOWS.glob("*.yml")
               for name, job in workflow(path.name)["jobs"].items()
               if any("tools.versions" in s.get("run", "") for s in job.get("steps", []))
               or {"ci", "floor", "versions"} & {w for c in job_commands(job) for w in c.split()}]
    assert running == [("test.yml", "versions")]


def test_venvs_are_cached_by_what_they_hold():
    """.venv by the exact Python and requirements.txt; each torch release's
    venv (kept for the cache to save) by the release and requirements.txt."""
    jobs = workflow("test.yml")["jobs"]
    for name, path, holds in (("checks", ".venv", []), ("tests", ".venv", []),
                              ("versions", "${{ runner.temp }}/venvs", ["${{ matrix.torch }}"])):
        job_steps = jobs[name]["steps"]
        [cache] = [s for s in job_steps if s.get("uses", "").startswith("actions/cache@")]
        python = next(s for s in job_steps if s.get("id") == "python")
        assert job_steps.index(python) < job_steps.index(cache) < min(
            i for i, s in enumerate(job_steps) if "run" in s)
        assert cache["with"]["path"] == path, name
        for part in ["${{ steps.python.outputs.python-version }}",
                     "${{ hashFiles('requirements.txt') }}", *holds]:
            assert part in cache["with"]["key"], (name, part)
    run = next(s["run"] for s in jobs["versions"]["steps"] if "tools.versions" in s.get("run", ""))
    assert '--venv-root "$RUNNER_TEMP/venvs"' in run and "--keep" in run
    # nothing that is published is built from a cache
    for name in ("pages.yml", "release.yml"):
        assert not any("cache" in s.get("uses", "") or "cache" in s.get("with", {})
                       for s in steps(workflow(name))), name


def test_a_newer_push_cancels_the_test_and_colab_runs_before_it():
    for name in ("test.yml", "colab.yml"):
        assert workflow(name)["concurrency"] == {
            "group": "${{ github.workflow }}-${{ github.ref }}", "cancel-in-progress": True}


def filtered_in(patterns, changed):
    """Whether GitHub runs a workflow with these `paths:` for these changed
    files: a file counts if the last pattern it matches is not negated."""
    def matches(pattern, path):
        regex = re.escape(pattern).replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
        return re.fullmatch(regex, path)
    return any([not p.startswith("!") for p in patterns if matches(p.lstrip("!"), f)][-1:]
               == [True] for f in changed)


def test_documents_alone_run_neither_tests_nor_colab():
    for name in ("test.yml", "colab.yml"):
        triggers = workflow(name)[True]
        for event in ("push", "pull_request"):
            paths = triggers[event]["paths"]
            for changed in (["README.md"], ["docs/maintaining.md", "CONTRIBUTING.md"]):
                assert not filtered_in(paths, changed), (name, event, changed)
            for changed in (["book/glossary.md"], ["tools/run.py"], ["Makefile"],
                            ["README.md", "requirements.txt"], [".github/workflows/test.yml"]):
                assert filtered_in(paths, changed), (name, event, changed)


def test_make_ci_runs_every_check():
    """`make -n ci` (what it would run, sub-makes expanded): each check."""
    dry = make("-n", "ci")
    for command in ("ruff check", "tools.generate --check", "actionlint", "zizmor",
                    "jupyter-book build --all --warningiserror",
                    "pytest -n 3 --dist loadfile", "--nbval", "tests/",
                    f"tools.versions --versions {torch_releases()[0]}", "--strict"):
        assert command in dry, command
    # the tests reuse the book that book-strict built
    assert dry.count("jupyter-book build") == 1, dry


def test_make_help_lists_every_target_once():
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    phony = {name for line in re.findall(r"^\.PHONY:(.*)$", makefile, re.M)
             for name in line.split()}
    listed = [line.split()[0] for line in make("help").splitlines()]
    assert sorted(listed) == sorted(phony)
    assert {"ci", "test", "book", "help"} <= set(listed)


# --- the actions: pinned, current, least permissions --------------------------

def test_every_action_is_pinned_by_commit_with_its_version():
    lines = uses_lines()
    assert lines
    for line in lines:    # or a workflow of this repository, at the caller's commit
        assert PINNED.fullmatch(line) or (ROOT / line).is_file(), line


def test_permissions_are_read_only_but_for_the_deploy_and_release_jobs():
    writes = {("pages.yml", "deploy"): {"pages": "write", "id-token": "write"},
              ("test.yml", "pages"): {"contents": "read", "pages": "write", "id-token": "write"},
              ("release.yml", "teacher-pack"): {"contents": "write"}}
    for path in WORKFLOWS.glob("*.yml"):
        flow = yaml.safe_load(path.read_text())
        assert flow["permissions"] == {"contents": "read"}, path.name
        for name, job in flow["jobs"].items():
            wanted = writes.get((path.name, name), {"contents": "read"})
            assert job["permissions"] == wanted, (path.name, name)


def test_checkouts_keep_no_credentials():
    for path in WORKFLOWS.glob("*.yml"):
        for step in steps(yaml.safe_load(path.read_text())):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, path.name


def test_dependabot_updates_the_actions():
    config = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text())
    assert config["version"] == 2
    assert any(u["package-ecosystem"] == "github-actions" and u["directory"] == "/"
               for u in config["updates"])


def lint(github_dir):
    return subprocess.run(["make", "-s", "-C", str(ROOT), "lint-workflows",
                           f"GITHUB_DIR={github_dir}"], capture_output=True, text=True)


def test_lint_workflows_passes_on_the_workflows():
    done = lint(ROOT / ".github")
    assert done.returncode == 0, done.stdout + done.stderr


def test_lint_workflows_fails_on_an_unpinned_action(tmp_path):
    shutil.copytree(ROOT / ".github", tmp_path / ".github")
    pages = tmp_path / ".github" / "workflows" / "pages.yml"
    text = pages.read_text()
    pinned = re.search(r"actions/checkout@[0-9a-f]{40} # v(\d+)\S*", text)
    pages.write_text(text.replace(pinned[0], f"actions/checkout@v{pinned[1]}", 1))
    done = lint(tmp_path / ".github")
    assert done.returncode != 0
    assert "unpinned-uses" in done.stdout + done.stderr


def test_lint_workflows_fails_on_an_actionlint_error(tmp_path):
    shutil.copytree(ROOT / ".github", tmp_path / ".github")
    pages = tmp_path / ".github" / "workflows" / "pages.yml"
    pages.write_text(pages.read_text().replace("needs: build", "needs: no-such-job"))
    done = lint(tmp_path / ".github")
    assert done.returncode != 0
    assert "no-such-job" in done.stdout + done.stderr


# --- the publish dry run's checks, on a tiny site -----------------------------

def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_link_checker_finds_the_links_that_lead_nowhere(tmp_path):
    write(tmp_path / "index.html",
          '<a href="book/a.html#part">a</a> <a href="book/">dir</a> <a href="#top">top</a>'
          '<img src="_static/logo%20one.png"> <a href="https://example.org/x.html">out</a>'
          '<a href="book/gone.html">gone</a> <a href="/root.html">root</a>'
          '<a href="mailto:a@b.c">mail</a> <script src="../outside.js"></script>')
    write(tmp_path / "book" / "a.html", '<link href="../_static/s.css?digest=1">'
                                        '<a href="../index.html">home</a>')
    write(tmp_path / "book" / "index.html", "")
    write(tmp_path / "root.html", "")
    write(tmp_path / "_static" / "logo one.png", "")
    write(tmp_path / "_static" / "s.css", "")
    write(tmp_path / "_static" / "macros.html", '<a href="{{ pathto(x) }}">template</a>')
    write(tmp_path / "outside.js", "")
    assert publish.broken_links(tmp_path) == [("index.html", "book/gone.html"),
                                              ("index.html", "/root.html"),
                                              ("index.html", "../outside.js")]
    # the 404 page's links start at the path the site is served under
    write(tmp_path / "404.html", '<a href="/book-name/book/a.html">a</a>'
                                 '<a href="/book-name/book/gone.html">gone</a>'
                                 '<a href="/other/book/a.html">other</a>')
    assert publish.broken_links(tmp_path, prefix="/book-name/") == [
        ("404.html", "/book-name/book/gone.html"), ("404.html", "/other/book/a.html"),
        ("index.html", "book/gone.html"), ("index.html", "/root.html"),
        ("index.html", "../outside.js")]


def test_address_checker_wants_each_chapter_to_open_in_the_repository(tmp_path):
    repo, notebook = "someone/book", "book/01_x.ipynb"
    colab = publish.colab_url(repo, "main", notebook)
    good = (f'<a href="https://github.com/{repo}">repo</a>'
            f'<a href="{colab}">launch</a><p class="colab-badge"><a href="{colab}">b</a></p>')
    write(tmp_path / "book" / "01_x.html", good)
    assert publish.address_problems(tmp_path, repo, [notebook]) == []
    assert publish.address_problems(tmp_path, "other/book", [notebook])
    write(tmp_path / "book" / "01_x.html", good.replace('<p class="colab-badge">', "<p>", 1)
          .replace(f'<a href="{colab}">b</a>', ""))
    assert any("not the badge and the launch button" in p
               for p in publish.address_problems(tmp_path, repo, [notebook]))
    write(tmp_path / "book" / "01_x.html", good)
    write(tmp_path / "index.html", "https://github.com/YOUR-ACCOUNT/YOUR-REPOSITORY")
    assert publish.address_problems(tmp_path, repo, [notebook]) == [
        "index.html: a placeholder address"]


def test_dry_run_expands_only_what_it_knows():
    assert publish.expand("x ${{ github.repository }} y", "a/b") == "x a/b y"
    with pytest.raises(ValueError, match="secrets.TOKEN"):
        publish.expand("${{ secrets.TOKEN }}", "a/b")


# --- licenses and citation ----------------------------------------------------

def test_licenses_are_there_and_named():
    mit = (ROOT / "LICENSE").read_text()
    assert mit.startswith("MIT License\n")
    assert "Copyright (c) 2026 the contributors to this book" in mit
    content = (ROOT / "LICENSE-CONTENT").read_text()
    assert "Creative Commons Attribution 4.0 International Public License" in content
    for section in ("Section 1 – Definitions.", "Section 8 – Interpretation."):
        assert section in content
    footer = yaml.safe_load((ROOT / "_config.yml").read_text())["html"]["extra_footer"]
    assert "MIT" in footer and "CC BY 4.0" in footer


def test_citation_cff_is_valid():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    schema = json.loads(CFF_SCHEMA.read_text())
    jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker()).validate(cff)
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert cff["title"] == config["title"]
    assert cff["authors"] == [{"name": "the contributors to this book"}]
    assert cff["license"] == "CC-BY-4.0"


def test_bibtex_names_a_person_family_first_and_an_entity_whole():
    assert citation.bibtex_author({"given-names": "Ada", "family-names": "Lovelace",
                                   "name-particle": "de"}) == "de Lovelace, Ada"
    assert citation.bibtex_author({"family-names": "Turing"}) == "Turing"
    assert citation.bibtex_author({"name": "The A & B Team"}) == "{The A \\& B Team}"


def test_citation_cff_schema_rejects_what_is_wrong():
    schema = json.loads(CFF_SCHEMA.read_text())
    bad = yaml.safe_load((ROOT / "CITATION.cff").read_text()) | {"license": "Not-A-License"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema).validate(bad)


def test_how_to_cite_is_generated_from_citation_cff():
    for path, text in citation.generated().items():
        assert path.read_text() == text, f"run python -m tools.citation ({path.name})"
    cite = (ROOT / "book" / "_generated" / "how_to_cite.md").read_text()
    assert "@misc{" in cite and "{{the contributors to this book}}" in cite
    references = (ROOT / "book" / "references.md").read_text()
    assert "```{include} _generated/how_to_cite.md" in references

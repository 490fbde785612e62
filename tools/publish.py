"""The Pages workflow's build, run here, and a check of the site it builds.

    python -m tools.publish [--repository OWNER/NAME] [--keep]

`make publish-dry-run` runs this. It copies the committed tree (HEAD) into
a scratch folder, and runs there the `run:` steps of the `build` job of
.github/workflows/pages.yml, in order, with their `env:`, and with
REPOSITORY set as GitHub sets it (`${{ github.repository }}`). Of the
`uses:` steps, checkout is the scratch copy, setup-python is this machine's
Python, and the upload step names the folder that is checked; any other
action stops the dry run, as does any other `${{ }}` expression. The scratch
copy uses this repository's .venv.

Then it checks the built site:
- every chapter's Colab badge and Colab launch button open that chapter in
  the repository named, every Colab link points into it, the repository
  button too, and no placeholder address is left;
- every local link (href or src to a file of the site) resolves, those of
  the 404 page (absolute, under /NAME/) too;
and that the workflow's placeholder guard stops a build when REPOSITORY is
empty.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import yaml

from tools.book import ROOT, toc_notebooks

PAGES = ROOT / ".github" / "workflows" / "pages.yml"
PLACEHOLDER = re.compile(r"YOUR-ACCOUNT|YOUR-REPOSITORY")
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


# --- the workflow's steps -------------------------------------------------

def build_steps(workflow=PAGES):
    """The steps of the workflow's `build` job."""
    return yaml.safe_load(Path(workflow).read_text())["jobs"]["build"]["steps"]


def expand(text, repository):
    """`${{ github.repository }}` as GitHub expands it; any other expression
    is refused (it would need GitHub to run)."""
    def one(match):
        if match[1] == "github.repository":
            return repository
        raise ValueError(f"the dry run cannot expand ${{{{ {match[1]} }}}}")
    return EXPRESSION.sub(one, str(text))


def shell_command(step):
    """The command GitHub runs a `run:` step with on Linux."""
    shell = step.get("shell")
    if shell is None:  # GitHub's default on Linux
        return ["bash", "-e", "-c"]
    if shell == "bash":
        return ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"]
    raise ValueError(f"the dry run runs bash steps only, not {shell!r}")


def run_step(step, folder, repository, environ=None):
    """Run one `run:` step in `folder`; returns the CompletedProcess."""
    env = dict(os.environ if environ is None else environ)
    for name, value in (step.get("env") or {}).items():
        env[name] = expand(value, repository)
    script = expand(step["run"], repository)
    return subprocess.run(shell_command(step) + [script], cwd=folder, env=env,
                          text=True, capture_output=True)


def scratch_copy(destination):
    """HEAD's tree in `destination`, with this repository's .venv."""
    destination.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=ROOT,
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(destination)], input=archive, check=True)
    venv = ROOT / ".venv"
    if venv.exists():
        (destination / ".venv").symlink_to(venv.resolve(), target_is_directory=True)
        # The venv was installed (`make setup`) from this requirements.txt:
        # keep make from reinstalling it because the copy's file is newer.
        stamp = venv / ".installed-requirements"
        copied = destination / "requirements.txt"
        if stamp.exists() and copied.read_bytes() == (ROOT / "requirements.txt").read_bytes():
            times = stamp.stat()
            os.utime(copied, ns=(times.st_atime_ns, times.st_mtime_ns - 1))
    return destination


def run_build(folder, repository, log=print):
    """Run the build job's steps in `folder`; returns the site's folder."""
    site = None
    for step in build_steps():
        label = step.get("name") or step.get("uses") or step.get("run", "").splitlines()[0]
        if "run" in step:
            log(f"- {label}")
            done = run_step(step, folder, repository)
            sys.stdout.write(done.stdout)
            sys.stderr.write(done.stderr)
            if done.returncode:
                raise SystemExit(f"step failed ({done.returncode}): {label}")
            continue
        action = step["uses"].split("@")[0]
        if action == "actions/checkout":
            log(f"- {action}: the scratch copy of HEAD")
        elif action == "actions/setup-python":
            wanted = str(step.get("with", {}).get("python-version", ""))
            have = subprocess.run([str(folder / ".venv" / "bin" / "python"), "-c",
                                   "import sys; print('%d.%d' % sys.version_info[:2])"],
                                  capture_output=True, text=True).stdout.strip()
            note = "" if have == wanted else f" (the workflow asks for {wanted})"
            log(f"- {action}: this machine's Python {have}{note}")
        elif action == "actions/upload-pages-artifact":
            site = folder / step["with"]["path"]
            log(f"- {action}: would upload {step['with']['path']}")
        else:
            raise SystemExit(f"the dry run does not know the action {action}")
    if site is None:
        raise SystemExit("the build job uploads no site")
    return site


# --- the built site -------------------------------------------------------

class Links(HTMLParser):
    """Every href and src of a page."""

    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.links.append(value)


def page_links(page):
    parser = Links()
    parser.feed(Path(page).read_text(errors="replace"))
    return parser.links


def site_pages(site):
    """The site's HTML pages (not the theme's templates copied to _static/)."""
    return [page for page in sorted(Path(site).rglob("*.html"))
            if "_static" not in page.relative_to(site).parts]


def broken_links(site, prefix=None):
    """[(page, link)] for each local link of the site that leads nowhere.
    `prefix` is the path the site is served under ('/NAME/' on GitHub
    Pages): a link from the root that starts with it (the 404 page's,
    which GitHub serves at any address) is followed from the site's root;
    any other link from the root leads nowhere."""
    site = Path(site).resolve()
    broken = []
    for page in site_pages(site):
        for link in page_links(page):
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or not parts.path:
                continue  # another site, data:, mailto:, or a place on this page
            if parts.path.startswith("/"):
                if not prefix or not parts.path.startswith(prefix):
                    broken.append((page.relative_to(site).as_posix(), link))
                    continue
                target = (site / unquote(parts.path[len(prefix):])).resolve()
            else:
                target = (page.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file() or site not in target.parents:
                broken.append((page.relative_to(site).as_posix(), link))
    return broken


def colab_url(repository, branch, notebook):
    return (f"https://colab.research.google.com/github/{repository}/blob/"
            f"{branch}/{notebook}")


def address_problems(site, repository, notebooks, branch="main"):
    """What in the site does not point at `repository`: a list of messages.

    `notebooks` are the chapters' paths in the repository ('book/01_x.ipynb');
    each one's page needs its Colab badge and its Colab launch button.
    """
    site = Path(site)
    problems = []
    colab = "https://colab.research.google.com/github/"
    for page in site_pages(site):
        name = page.relative_to(site).as_posix()
        if PLACEHOLDER.search(page.read_text(errors="replace")):
            problems.append(f"{name}: a placeholder address")
        for link in page_links(page):
            if link.startswith(colab) and not link.startswith(f"{colab}{repository}/blob/"):
                problems.append(f"{name}: a Colab link outside {repository}: {link}")
    for notebook in notebooks:
        page = site / Path(notebook).with_suffix(".html")
        if not page.is_file():
            problems.append(f"{notebook}: no page {page.relative_to(site)}")
            continue
        wanted = colab_url(repository, branch, notebook)
        links = page_links(page)
        if links.count(wanted) < 2:  # the badge under the title and the launch button
            problems.append(f"{page.relative_to(site)}: {links.count(wanted)} link(s) to "
                            f"{wanted}, not the badge and the launch button")
        if f"https://github.com/{repository}" not in links:
            problems.append(f"{page.relative_to(site)}: no repository button to "
                            f"https://github.com/{repository}")
    return problems


def chapter_notebooks():
    """The toc's notebooks, as paths inside the repository ('book/01_x.ipynb')."""
    return [path.relative_to(ROOT).as_posix() for path in toc_notebooks()]


def guard_fires_without_repository(folder):
    """Whether the address step fails when REPOSITORY is empty."""
    step = next(s for s in build_steps() if "REPOSITORY" in (s.get("env") or {}))
    return run_step(step, folder, repository="").returncode != 0


# --- the dry run ------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repository", default="someone/pruning-book",
                        help="OWNER/NAME, as ${{ github.repository }} (default: %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", args.repository):
        parser.error("--repository is OWNER/NAME")
    if subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                      capture_output=True, text=True).stdout.strip():
        print("note: uncommitted changes are not part of the dry run (it builds HEAD)")

    scratch = Path(tempfile.mkdtemp(prefix="publish-dry-run."))
    problems = []
    try:
        print(f"The placeholder guard, with REPOSITORY empty ({scratch}/guard):")
        if guard_fires_without_repository(scratch_copy(scratch / "guard")):
            print("- refuses to build, as it should")
        else:
            problems.append("the address step runs on with an empty REPOSITORY")

        folder = scratch_copy(scratch / "repository")
        print(f"The build job of {PAGES.relative_to(ROOT)}, REPOSITORY={args.repository}, "
              f"in {folder}:")
        site = run_build(folder, args.repository)
        config = yaml.safe_load((folder / "_config.yml").read_text())
        branch = config["repository"].get("branch", "main")
        notebooks = chapter_notebooks()
        problems += address_problems(site, args.repository, notebooks, branch)
        broken = broken_links(site, prefix=f"/{args.repository.split('/')[1]}/")
        problems += [f"{page}: broken link {link}" for page, link in broken]
        pages = len(site_pages(site))
        print(f"Site: {pages} pages, {len(notebooks)} chapters with Colab links to "
              f"{args.repository}, {len(broken)} broken local links")
    finally:
        if args.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    if problems:
        return 1
    print("publish dry run: the workflow's build works, and the site points at "
          f"{args.repository}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

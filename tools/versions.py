"""Run every chapter alone on several torch releases and write the matrix.

    python -m tools.versions                      # every release of torch_releases.txt
    python -m tools.versions --versions "2.5.1 2.9.1"
    python -m tools.versions --versions 2.5.1 --results /tmp/r.json --strict
    python -m tools.versions --versions 2.5.1 --prepare   # only build the venv
    python -m tools.versions --check              # fail while a stored result is stale

One venv (outside the repository, under --venv-root) holds one release at a
time: that torch from PyPI (a CUDA build, run on the CPU, as a reader would
get it with a plain `pip install torch==X`) and the book's pins from
requirements.txt of the packages the chapters import. From one release to
the next, pip replaces torch and those of its dependencies whose versions
change. Each notebook of _toc.yml is run by `tools.run.run_alone`: copied
alone into an empty folder and executed top to bottom in a fresh kernel of
that venv, as in a fresh Colab runtime. The venv is removed at the end
unless --keep (or KEEP=1); --prepare builds it and stops, keeping it, so
that a later run with the same --venv-root finds it ready.

Results are cached in a JSON file, keyed for each chapter by a hash of its
code cells (without comments, `# @title` lines among them, docstrings and
metadata: tools.codekey) and of the pins installed beside torch: a
(release, chapter) pair whose key is already there is not run again, and a
release with nothing to run builds no venv. A row run on other code or
other pins is marked `*` in the table until it is run again. Each result
records the machine it ran on (cores, architecture). The Markdown table
that book/versions.md includes is written from that file after every run.
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from tools.book import DATA, GENERATED, ROOT, pins, toc_notebooks, torch_releases, version_tuple
from tools.codekey import normalized
from tools.pip_config import pip_environment
from tools.run import clean_environment, run_alone

RESULTS = DATA / "versions_matrix.json"
TABLE = GENERATED / "versions_matrix.md"
PROBE = Path(__file__).with_name("probe_torch.py")
# The packages a chapter imports besides torch (installed at the book's pins;
# they make part of each result's key) and those the runner needs in the
# venv (at the runner's own versions).
CHAPTER_PACKAGES = ("torchviz", "graphviz", "matplotlib", "scikit-learn", "ipykernel",
                    "torch-pruning")
RUNNER_PACKAGES = ("nbclient", "nbformat")
VENV_NAME = "torch-versions"
FREE_GB_NEEDED = 15   # a CUDA build of torch with its nvidia-* wheels: ~7 GB


# The cache key -------------------------------------------------------------

def code_sources(path, notebook=None):
    """The sources of the notebook's code cells (of `notebook`, its cells as
    about to be written, if given), without `# @title` lines."""
    for _ in range(10):  # someone may be writing the notebook right now
        try:
            cells = (notebook or json.loads(Path(path).read_text()))["cells"]
            break
        except (json.JSONDecodeError, KeyError):
            time.sleep(2)
    else:
        raise RuntimeError(f"{path} is not a readable notebook")
    sources = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = cell["source"]
        source = "".join(source) if isinstance(source, list) else source
        sources.append("\n".join(line for line in source.splitlines()
                                 if not line.lstrip().startswith("# @title")))
    return sources


def venv_pins(pinned=None):
    """{package: version}: requirements.txt's pins of the packages installed
    beside torch (CHAPTER_PACKAGES that requirements.txt pins)."""
    pinned = pins() if pinned is None else pinned
    return {name: pinned[name] for name in CHAPTER_PACKAGES if name in pinned}


def notebook_key(path, installed_pins, notebook=None):
    """Hash of the notebook's code, cell by cell, without comments and
    docstrings (tools.codekey), and of the pins installed beside torch."""
    code = "\n\0\n".join(normalized(source) for source in code_sources(path, notebook))
    pins_text = "\n".join(f"{name}=={version}"
                          for name, version in sorted(installed_pins.items()))
    text = code + "\n\0pins\0\n" + pins_text
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def machine():
    """The machine this process runs on, as recorded with each result."""
    return {"cores": os.cpu_count(), "arch": platform.machine()}


# The venv ------------------------------------------------------------------

def requirements(release):
    """What pip installs into the venv for torch `release`."""
    wanted = [f"torch=={release}"]
    wanted += [f"{name}=={version}" for name, version in venv_pins().items()]
    wanted += [name for name in CHAPTER_PACKAGES if name not in venv_pins()]
    for name in RUNNER_PACKAGES:
        try:
            wanted.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            wanted.append(name)
    return wanted


def installed(interpreter):
    """{package: version} of the venv whose interpreter is given ({} if none)."""
    if not Path(interpreter).exists():
        return {}
    done = subprocess.run([str(interpreter), "-m", "pip", "list", "--format=json",
                           "--disable-pip-version-check"],
                          capture_output=True, text=True, env=clean_environment())
    if done.returncode != 0:
        return {}
    return {p["name"].lower().replace("_", "-"): p["version"]
            for p in json.loads(done.stdout)}


def satisfied(wanted, have):
    """Whether every `name==version` (or bare name) of `wanted` is in `have`
    ({name: version}; a local version such as 2.13.0+cpu matches 2.13.0)."""
    for requirement in wanted:
        name, _, version = requirement.partition("==")
        found = have.get(name.lower().replace("_", "-"))
        if found is None or (version and found.split("+")[0] != version):
            return False
    return True


def check_disk(folder, needed):
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free / 1e9
    if free < needed:
        sys.exit(f"only {free:.0f} GB free under {folder}; a torch venv needs "
                 f"{needed:g} GB (a CUDA build of torch with its nvidia-* wheels)")


def build_venv(release, venv_root, python, torch_index=None, free_gb=FREE_GB_NEEDED):
    """The one venv of the run, with torch `release` and the book's pins.

    A venv that already has them is used as it is. Otherwise it is moved
    from its release to this one: pip replaces torch and those of its
    dependencies (nvidia-*, triton, ...) whose pinned versions change, which
    costs far less than a new venv of several GB per release."""
    venv = Path(venv_root) / VENV_NAME
    interpreter = venv / "bin" / "python"
    wanted = requirements(release)
    if satisfied(wanted, installed(interpreter)):
        return venv
    env = pip_environment(release)
    pip = [str(interpreter), "-m", "pip", "install", "--quiet"]
    if not interpreter.exists():
        check_disk(Path(venv_root), free_gb)
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        subprocess.run(pip + ["--upgrade", "pip"], check=True, env=env)
    if torch_index:  # e.g. PyTorch's own index of CPU builds
        subprocess.run(pip + ["--index-url", torch_index, f"torch=={release}"],
                       check=True, env=env)
    subprocess.run(pip + wanted, check=True, env=env)
    if not satisfied(wanted, installed(interpreter)):
        raise RuntimeError(f"the venv {venv} lacks some of: {' '.join(wanted)}")
    return venv


def probe(venv):
    """The facts tools/probe_torch.py reads in the venv."""
    with tempfile.TemporaryDirectory(prefix="probe-") as folder:
        done = subprocess.run([str(venv / "bin" / "python"), "-I", str(PROBE)],
                              cwd=folder, capture_output=True, text=True,
                              env=clean_environment(venv))
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{PROBE.name} failed in {venv}: {tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_chapter(venv, notebook, key):
    """One chapter run alone in the venv: its result, with the key, the date
    and the machine."""
    result, _ = run_alone(notebook, python=venv / "bin" / "python", venv=venv, nice=True)
    result.pop("raised", None)
    result.update(key=key, date=datetime.date.today().isoformat(), machine=machine())
    return result


# The results ---------------------------------------------------------------

def load(path):
    return json.loads(path.read_text()) if path.is_file() else {}


def save(data, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def problem(result):
    """Whether a result is a failure or a pass to report (new stderr text,
    files written)."""
    return (result.get("status") != "pass" or bool(result.get("new_stderr"))
            or bool(result.get("files_written")))


# The table -----------------------------------------------------------------

def note_text(result):
    """What a numbered note under the table says about a result."""
    if result["status"] != "pass":
        where = f"cell {result['cell']}: " if "cell" in result else ""
        first = result["error"].splitlines()[0] if result.get("error") else ""
        text = f"{where}`{first[:160]}`"
        if result.get("line"):
            text += f" at `{result['line'][:120]}`"
        return text
    if result.get("new_stderr"):
        index, line = result["new_stderr"][0]
        return f"passes, but prints on stderr in cell {index}: `{line[:160]}`"
    return "passes, but writes " + ", ".join(f"`{n}`" for n in result["files_written"])


def matrix_rows(data, shown, keys):
    """(table lines, notes, how many results are stale)."""
    lines = ["| torch | " + " | ".join(stem.split("_")[0] for stem in keys) + " |",
             "| --- |" + " --- |" * len(keys)]
    notes, stale = [], 0
    for release in shown:
        cells = []
        for stem, key in keys.items():
            result = data[release].get("chapters", {}).get(stem)
            if result is None:
                cells.append("not run")
                continue
            text = "pass" if result["status"] == "pass" else "**fail**"
            if problem(result):
                notes.append(f"{len(notes) + 1}. torch {release}, {stem}: {note_text(result)}")
                text += f" [{len(notes)}]"
            text += f", {result['seconds']:.0f} s"
            if result.get("key") != key:
                text += ", stale"
                stale += 1
            cells.append(text)
        lines.append(f"| {release} | " + " | ".join(cells) + " |")
    return lines, notes, stale


def span(releases):
    return releases[0] if len(releases) == 1 else f"{releases[0]} to {releases[-1]}"


def machines_text(data, shown):
    """The machines recorded with the results shown, with their releases."""
    found = {}
    for release in shown:
        for result in data[release].get("chapters", {}).values():
            recorded = result.get("machine")
            name = (f"{recorded['cores']} cores, {recorded['arch']}" if recorded
                    else "a machine that was not recorded")
            found.setdefault(name, [])
            if release not in found[name]:
                found[name].append(release)
    if len(found) == 1:
        return f"on {next(iter(found))}"
    return "on " + "; ".join(f"{name} (torch {span(releases)})"
                             for name, releases in found.items())


def footer(data, shown, stale):
    dates = sorted({r["date"] for release in shown
                    for r in data[release].get("chapters", {}).values()})
    pythons = sorted({data[r]["probe"]["python"] for r in shown if data[r].get("probe")})
    results = sum(len(data[release].get("chapters", {})) for release in shown)
    lines = ["", f"**{results - stale} of {results} results are current**: run on the "
             "chapter's code and the book's pins as they are today."
             + (f" The {stale} marked *stale* were run on an earlier version of the "
                "chapter's code or of the pins; `make versions` runs them again, and "
                "`make versions-check` fails while any is left." if stale else ""), ""]
    lines.append(
        "Each cell: the chapter, copied alone into an empty folder, run top to "
        "bottom by nbclient in a fresh kernel of a venv with that torch (from PyPI, "
        "or a file pip finds on this machine; its build is in the last table) and "
        "the book's other pinned packages; *pass* means no cell "
        "raised an error it was not tagged to raise; the seconds are the run's "
        f"wall time {machines_text(data, shown)}."
        + (f" Python {', '.join(pythons)}." if pythons else "")
        + (f" Run on {dates[0]}." if len(dates) == 1
           else f" Runs from {dates[0]} to {dates[-1]}." if dates else ""))
    return lines


def yes(value):
    return "yes" if value else "no"


def raise_site(probe_facts):
    site = probe_facts.get("nan_raise_site", "not probed")
    if site is None:
        return "no raise site"
    if site is False:
        return "no error raised"
    return site if site == "not probed" else f"`{site}`"


def probed(probe_facts, key):
    """yes or no for a fact of the probe; "not probed" for a row read
    before the probe looked at it."""
    return yes(probe_facts[key]) if key in probe_facts else "not probed"


def probe_table(data, shown):
    probes = [data[r]["probe"] for r in shown if data[r].get("probe")]
    if not probes:
        return []
    lines = ["", "Read live in each release's venv (the same run):", "",
             "| torch | build | `nn.Linear(3, 2)(torch.ones(3))`'s graph | "
             "`get_gradient_edge` | `Node._input_metadata` | "
             "`torch.batch_norm_update_stats` | anomaly mode's NaN check raised from |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for p in probes:
        build = f"CUDA {p['cuda_build']}" if p.get("cuda_build") else "CPU"
        lines.append(f"| {p['torch']} | {build} | `{p['linear_1d']}` | "
                     f"{yes(p['get_gradient_edge'])} | {yes(p['_input_metadata'])} | "
                     f"{probed(p, 'batch_norm_update_stats')} | {raise_site(p)} |")
    return lines


def table_text(data, releases, keys):
    """The Markdown of the matrix: a row for each release of `releases` that
    `data` has and for each other release with results; a column for each
    chapter stem of `keys` ({stem: its key today}), `*` where the key differs."""
    shown = [r for r in sorted(data, key=version_tuple) if r in releases or data[r]]
    lines, notes, stale = matrix_rows(data, shown, keys)
    return "\n".join(lines + ([""] + notes if notes else [])
                     + footer(data, shown, stale) + probe_table(data, shown)) + "\n"


def write_table(data, path, releases):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(table_text(data, releases, today_keys()))


def today_keys(chapters=None):
    """{stem: its key today} of each chapter (from `chapters`, {path: notebook}
    about to be written, if given)."""
    installed_pins = venv_pins()
    return {nb.stem: notebook_key(nb, installed_pins, (chapters or {}).get(nb))
            for nb in toc_notebooks()}


def generated(chapters=None):
    """{the matrix's table: its text}, from the stored results and the
    chapters' code as `make generate` writes it: a result run on other code
    is marked stale as soon as the code changes."""
    return {TABLE: table_text(load(RESULTS), torch_releases(), today_keys(chapters))}


def stale_results(data, releases):
    """['release stem'] of each stored result whose key is not today's."""
    keys = today_keys()
    return [f"{release} {stem}" for release in releases for stem, key in keys.items()
            if data.get(release, {}).get("chapters", {}).get(stem, {}).get("key") != key]


# The run -------------------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--versions", default=os.environ.get("VERSIONS")
                        or " ".join(torch_releases()),
                        help="torch releases, separated by spaces "
                             "(default: those of torch_releases.txt)")
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help="the JSON file of results (the cache)")
    parser.add_argument("--table", type=Path, default=None,
                        help="the Markdown table (default: beside the book's results only)")
    parser.add_argument("--venv-root", type=Path,
                        default=Path(os.environ.get("VENV_ROOT", ROOT.parent / "venvs")))
    parser.add_argument("--python", default=os.environ.get("PYTHON", "python3"),
                        help="the interpreter that creates the venv")
    parser.add_argument("--keep", action="store_true", default=os.environ.get("KEEP") == "1",
                        help="keep the venv after the run")
    parser.add_argument("--notebooks", nargs="*", help="only these notebooks (default: the toc's)")
    parser.add_argument("--torch-index", default=os.environ.get("TORCH_INDEX"),
                        help="install torch from this package index (default: PyPI)")
    parser.add_argument("--min-free-gb", type=float, default=FREE_GB_NEEDED,
                        help="refuse to build a venv with less free disk than this")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 if a chapter fails, prints new text on stderr "
                             "or writes files")
    parser.add_argument("--prepare", action="store_true",
                        help="build or refresh the venv of the one release given, keep "
                             "it, and exit without running anything")
    parser.add_argument("--check", action="store_true",
                        help="run nothing; exit 1, naming them, while a stored result "
                             "of --versions is stale (run on other code or pins)")
    return parser


def parse_args(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    args.versions = args.versions.split()
    if args.prepare and len(args.versions) != 1:
        parser.error("--prepare builds the venv of one release: give one with --versions")
    if args.table is None and args.results == RESULTS:
        args.table = TABLE
    return args


def chapters(args):
    """The notebooks to run (read again for each release: chapters added
    meanwhile are run on the next ones)."""
    if args.notebooks:
        return [Path(p).resolve() for p in args.notebooks]
    return toc_notebooks()


def print_result(release, stem, result):
    words = [result["status"], result.get("cell"), result.get("error"), result.get("line"),
             f"({result['seconds']} s)"]
    print(f"torch {release}: {stem}: " + " ".join(str(w) for w in words if w), flush=True)
    for index, text in result.get("new_stderr", []):
        print(f"    new stderr in cell {index}: {text}", flush=True)
    if result.get("files_written"):
        print(f"    wrote {', '.join(result['files_written'])}", flush=True)


def ready_venv(release, args):
    started = time.monotonic()
    print(f"torch {release}: preparing the venv", flush=True)
    venv = build_venv(release, args.venv_root, args.python, args.torch_index,
                      args.min_free_gb)
    print(f"torch {release}: venv ready in {time.monotonic() - started:.0f} s ({venv})",
          flush=True)
    return venv


def run_release(release, args, data):
    """Run the chapters of `release` whose key is not in `data` yet; return
    the venv used (None if nothing ran)."""
    installed_pins = venv_pins()
    keys = {nb: notebook_key(nb, installed_pins) for nb in chapters(args)}
    row = data.setdefault(release, {"chapters": {}})
    todo = [nb for nb, key in keys.items()
            if row["chapters"].get(nb.stem, {}).get("key") != key]
    if not todo:
        print(f"torch {release}: every chapter already run on its current code and pins",
              flush=True)
        return None
    venv = ready_venv(release, args)
    row["probe"] = probe(venv)
    for nb in todo:
        row["chapters"][nb.stem] = run_chapter(venv, nb, keys[nb])
        save(data, args.results)
        if args.table:
            write_table(data, args.table, args.versions)
        print_result(release, nb.stem, row["chapters"][nb.stem])
    return venv


def tally(data, releases, notebooks):
    """(chapters passed, ['release stem' of each failure or pass to report])."""
    passed, failures = 0, []
    for release in releases:
        for nb in notebooks:
            result = data.get(release, {}).get("chapters", {}).get(nb.stem, {})
            if problem(result):
                failures.append(f"{release} {nb.stem}")
            else:
                passed += 1
    return passed, failures


def run_all(args, data):
    venv = None
    try:
        for release in args.versions:
            venv = run_release(release, args, data) or venv
    finally:
        if venv is not None and not args.keep:
            shutil.rmtree(venv, ignore_errors=True)


def main(argv=None):
    args = parse_args(argv)
    if args.prepare:
        ready_venv(args.versions[0], args)
        return 0
    data = load(args.results)
    if args.check:
        stale = stale_results(data, args.versions)
        print("stale (run `make versions`): " + ", ".join(stale) if stale
              else "every stored result is current")
        return 1 if stale else 0
    started = time.monotonic()
    run_all(args, data)
    save(data, args.results)
    if args.table:
        write_table(data, args.table, args.versions)
    passed, failures = tally(data, args.versions, chapters(args))
    print(f"wall time {time.monotonic() - started:.0f} s; failed or new stderr: "
          + (", ".join(failures) if failures else "none"))
    print(f"chapters: {passed} passed, {len(failures)} failed")
    return 1 if failures and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())

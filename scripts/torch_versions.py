"""Run every chapter alone on several torch releases and write the matrix.

    python scripts/torch_versions.py                      # every release below
    python scripts/torch_versions.py --versions "2.5.1 2.9.1"
    python scripts/torch_versions.py --versions 2.5.1 --results /tmp/r.json --strict

One venv (outside the repository, under --venv-root) holds one release at a
time: that torch from PyPI (a CUDA build, run on the CPU, as a reader would get
it with a plain `pip install torch==X`) and the book's other pins from
requirements.txt. From one release to the next, pip replaces torch and those
of its dependencies whose versions change. Each notebook of _toc.yml is copied
alone into an empty temporary folder and executed top to bottom by nbclient in
a fresh kernel of that venv, as in a fresh Colab runtime. The venv is removed
at the end unless --keep (or KEEP=1).

Results are cached in a JSON file, keyed by a hash of each notebook's code
cells (without `# @title` lines and without metadata): a (release, chapter)
pair whose key is already there is not run again, and a release with nothing
to run builds no venv. The Markdown table that book/versions.md includes is
written from that file after every run.
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from book_files import toc_notebooks  # noqa: E402

# Every minor release from the book's floor to the newest one PyPI serves.
RELEASES = ["2.5.1", "2.6.0", "2.7.1", "2.8.0", "2.9.1", "2.10.0", "2.11.0",
            "2.12.1", "2.13.0", "2.14.1", "2.15.0"]
# The book's non-torch packages that a chapter imports, as Colab has them;
# nbclient and ipykernel run the notebook.
PINNED = ["torchviz", "graphviz", "matplotlib", "scikit-learn", "ipykernel",
          "torch-pruning", "nbclient", "nbformat"]
GENERATED = ROOT / "book" / "_generated"
RESULTS = GENERATED / "versions_matrix.json"
TABLE = GENERATED / "versions_matrix.md"
FREE_GB_NEEDED = 15   # a CUDA build of torch with its nvidia-* wheels: ~7 GB
PIP_CAP = Path("/etc/xdg/pip/constraints.txt")

RUNNER = r"""
import json, sys, time, nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
path = sys.argv[1]
notebook = nbformat.read(path, as_version=4)
stored = nbformat.read(path, as_version=4)
client = NotebookClient(notebook, timeout=900, kernel_name="python3",
                        record_timing=False,
                        resources={"metadata": {"path": "."}})
result = {"status": "pass"}
start = time.monotonic()
FAILING_LINE = nbformat.v4.new_code_cell(
    "import sys, traceback\n"
    "frames = [f for f in traceback.extract_tb(sys.last_traceback)\n"
    "          if not f.filename.endswith('interactiveshell.py')]\n"
    "print(frames[0].lineno if frames else 0)")
try:
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            try:
                client.execute_cell(cell, index)
            except CellExecutionError:
                result["status"] = "fail"
                result["cell"] = index + 1
                error = next(o for o in cell.outputs if o.output_type == "error")
                result["error"] = f"{error.ename}: {error.evalue}".strip()
                try:  # the line of the cell that raised
                    notebook.cells.append(FAILING_LINE)
                    client.execute_cell(FAILING_LINE, len(notebook.cells) - 1)
                    notebook.cells.pop()
                    number = int(FAILING_LINE.outputs[0]["text"].split()[-1])
                    if 0 < number <= len(cell.source.splitlines()):
                        result["line"] = cell.source.splitlines()[number - 1].strip()
                except Exception:
                    pass
                break
except Exception as error:  # a timeout or a dead kernel
    result["status"] = "fail"
    result["error"] = f"{type(error).__name__}: {error}".strip().splitlines()[0]
result["seconds"] = round(time.monotonic() - start, 1)


def stderr_lines(cell):
    return [line for output in cell.get("outputs", [])
            if output.output_type == "stream" and output.name == "stderr"
            for line in output.text.splitlines() if line.strip()]


# Text on stderr where the stored run printed none: nbval fails on it.
result["new_stderr"] = [
    [index + 1, stderr_lines(cell)[0]]
    for index, (cell, old) in enumerate(zip(notebook.cells, stored.cells))
    if cell.cell_type == "code" and stderr_lines(cell) and not stderr_lines(old)]
print("RESULT " + json.dumps(result))
"""

PROBE = r"""
import os
os.environ["TORCH_SHOW_CPP_STACKTRACES"] = "1"
import json, platform, re, torch, torch.autograd.graph as graph


class ReturnsNaN(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


def nan_raise_site():
    try:
        with torch.autograd.set_detect_anomaly(True):
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ReturnsNaN.apply(torch.ones(3, requires_grad=True)).sum().backward()
    except RuntimeError as error:
        found = re.search(r"Exception raised from (\S+) at", str(error))
        return found[1] if found else None
def chain(node):
    names = []
    while node is not None:
        names.append(type(node).__name__)
        edges = [n for n, _ in node.next_functions if n is not None]
        node = edges[-1] if edges else None
    return " -> ".join(names)
x = torch.ones(2, requires_grad=True)
node = (x * 2).grad_fn
print(json.dumps({
    "torch": torch.__version__, "python": platform.python_version(),
    "cuda_build": torch.version.cuda,
    "get_gradient_edge": hasattr(graph, "get_gradient_edge"),
    "_input_metadata": hasattr(node, "_input_metadata"),
    "linear_1d": chain(torch.nn.Linear(3, 2)(torch.ones(3)).grad_fn),
    "nan_raise_site": nan_raise_site(),
}))
"""


def notebook_key(path):
    """Hash of the code cells' sources, without `# @title` lines."""
    for attempt in range(10):  # someone may be writing the notebook right now
        try:
            cells = json.loads(path.read_text())["cells"]
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
    return hashlib.sha256("\n\0\n".join(sources).encode()).hexdigest()[:16]


def pins():
    """The book's pins for PINNED packages, from requirements.txt; the
    running interpreter's versions for those not pinned there."""
    pinned = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        match = re.match(r"([A-Za-z0-9_.-]+)==(\S+)$", line)
        if match:
            pinned[match.group(1).lower().replace("_", "-")] = line
    from importlib import metadata
    result = []
    for name in PINNED:
        if name in pinned:
            result.append(pinned[name])
        elif name in ("nbclient", "nbformat"):
            try:
                result.append(f"{name}=={metadata.version(name)}")
            except metadata.PackageNotFoundError:
                result.append(name)
    return result


def version_tuple(text):
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def pip_environment(release):
    """pip's environment; past a local cap on torch (a constraints file in
    pip's configuration), the configuration files are not read."""
    env = dict(os.environ)
    if PIP_CAP.is_file():
        cap = re.search(r"^torch<=(\S+)", PIP_CAP.read_text(), re.M)
        if cap and version_tuple(release) > version_tuple(cap.group(1)):
            env["PIP_CONFIG_FILE"] = os.devnull
    return env


def check_disk(folder, needed):
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free / 1e9
    if free < needed:
        sys.exit(f"only {free:.0f} GB free under {folder}; a torch venv needs "
                 f"{needed} GB (a CUDA build of torch with its nvidia-* wheels)")


def installed_torch(interpreter):
    probe = subprocess.run([interpreter, "-c", "import torch, nbclient, torchviz; "
                            "print(torch.__version__)"], capture_output=True, text=True)
    return probe.stdout.strip().split("+")[0] if probe.returncode == 0 else None


def build_venv(release, venv_root, python, torch_index=None, free_gb=FREE_GB_NEEDED):
    """The one venv of the run, with torch `release` and the book's pins.

    The venv is moved from release to release: pip replaces torch and those
    of its dependencies (nvidia-*, triton, ...) whose pinned versions change,
    which costs far less than a new venv of several GB per release."""
    venv = venv_root / "torch-versions"
    interpreter = venv / "bin" / "python"
    if interpreter.exists() and installed_torch(interpreter) == release:
        return venv
    env = pip_environment(release)
    pip = [interpreter, "-m", "pip", "install", "--quiet"]
    if not interpreter.exists():
        check_disk(venv_root, free_gb)
        subprocess.run([python, "-m", "venv", venv], check=True)
        subprocess.run(pip + ["--upgrade", "pip"], check=True, env=env)
    if torch_index:  # e.g. PyTorch's own index of CPU builds
        subprocess.run(pip + ["--index-url", torch_index, f"torch=={release}"],
                       check=True, env=env)
    subprocess.run(pip + [f"torch=={release}", *pins()], check=True, env=env)
    if installed_torch(interpreter) != release:
        raise RuntimeError(f"the venv has no working torch {release}")
    return venv


def clean_environment(venv):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "VIRTUAL_ENV",
                        "JUPYTER_PATH", "JUPYTER_DATA_DIR", "MPLBACKEND")}
    env["PYTHONNOUSERSITE"] = "1"
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_chapter(venv, notebook):
    with tempfile.TemporaryDirectory(prefix="chapter-alone-") as folder:
        copy = Path(folder) / notebook.name
        shutil.copy(notebook, copy)
        start = time.monotonic()
        try:
            done = subprocess.run(
                ["nice", "-n", "10", venv / "bin" / "python", "-c", RUNNER, notebook.name],
                cwd=folder, env=clean_environment(venv), capture_output=True,
                text=True, timeout=3600)
        except subprocess.TimeoutExpired:
            return {"status": "fail", "error": "timed out after 3600 s",
                    "seconds": round(time.monotonic() - start, 1), "new_stderr": []}
        lines = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
        if not lines:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return {"status": "fail", "error": f"runner failed: {tail}",
                    "seconds": round(time.monotonic() - start, 1), "new_stderr": []}
        result = json.loads(lines[-1][len("RESULT "):])
        left = sorted(p.name for p in Path(folder).iterdir())
        if result["status"] == "pass" and left != [notebook.name]:
            result["files_written"] = [n for n in left if n != notebook.name]
        return result


def load(path):
    return json.loads(path.read_text()) if path.is_file() else {}


def save(data, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def chapter_label(stem):
    return stem.split("_")[0]


def write_table(data, path, releases):
    notebooks = toc_notebooks()
    keys = {nb.stem: notebook_key(nb) for nb in notebooks}
    shown = [r for r in sorted(data, key=version_tuple) if r in releases or data[r]]
    lines = ["| torch | " + " | ".join(chapter_label(nb.stem) for nb in notebooks) + " |",
             "| --- |" + " --- |" * len(notebooks)]
    notes, stale = [], False
    for release in shown:
        row = data[release]
        cells = []
        for nb in notebooks:
            result = row.get("chapters", {}).get(nb.stem)
            if result is None:
                cells.append("not run")
                continue
            text = "pass" if result["status"] == "pass" else "**fail**"
            if result["status"] != "pass" or result.get("new_stderr"):
                notes.append((release, nb.stem, result))
                text += f" [{len(notes)}]"
            text += f", {result['seconds']:.0f} s"
            if result["key"] != keys[nb.stem]:
                text += " *"
                stale = True
            cells.append(text)
        lines.append(f"| {release} | " + " | ".join(cells) + " |")
    for number, (release, stem, result) in enumerate(notes, 1):
        if result["status"] != "pass":
            where = f"cell {result['cell']}: " if "cell" in result else ""
            first = result["error"].splitlines()[0] if result["error"] else ""
            lines_note = f"{where}`{first[:160]}`"
            if result.get("line"):
                lines_note += f" at `{result['line'][:120]}`"
        else:
            index, text = result["new_stderr"][0]
            lines_note = f"passes, but prints on stderr in cell {index}: `{text[:160]}`"
        notes[number - 1] = f"{number}. torch {release}, {stem}: {lines_note}"
    dates = sorted({r["date"] for row in data.values()
                    for r in row.get("chapters", {}).values()})
    pythons = sorted({row["probe"]["python"] for row in data.values() if row.get("probe")})
    footer = [
        "",
        *(["\\* run on an earlier version of the chapter's code (the chapter has "
           "changed since; `make versions` runs it again).", ""] if stale else []),
        "Each cell: the chapter, copied alone into an empty folder, run top to "
        "bottom by nbclient in a fresh kernel of a venv with that torch (from PyPI, "
        "or a file pip finds on this machine; its build is in the last table) and "
        "the book's other pinned packages; *pass* means no cell "
        "raised an error it was not tagged to raise; the seconds are the run's "
        "wall time on a shared 2-core machine."
        + (f" Python {', '.join(pythons)}." if pythons else "")
        + (f" Run on {dates[0]}." if len(dates) == 1
           else f" Runs from {dates[0]} to {dates[-1]}." if dates else ""),
    ]
    probes = [(release, data[release]["probe"]) for release in shown
              if data[release].get("probe")]
    if probes:
        footer += ["", "Read live in each release's venv (the same run):", "",
                   "| torch | build | `nn.Linear(3, 2)(torch.ones(3))`'s graph | "
                   "`get_gradient_edge` | `Node._input_metadata` | anomaly mode's NaN "
                   "check raised from |",
                   "| --- | --- | --- | --- | --- | --- |"]
        yes = lambda value: "yes" if value else "no"
        for release, probe in probes:
            build = f"CUDA {probe['cuda_build']}" if probe.get("cuda_build") else "CPU"
            footer.append(f"| {probe['torch']} | {build} | `{probe['linear_1d']}` | "
                          f"{yes(probe['get_gradient_edge'])} | "
                          f"{yes(probe['_input_metadata'])} | "
                          + (f"`{probe['nan_raise_site']}`" if probe.get("nan_raise_site")
                             else "no raise site" if "nan_raise_site" in probe
                             else "not probed") + " |")
    text = "\n".join(lines + ([""] + notes if notes else []) + footer) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--versions", default=os.environ.get("VERSIONS") or " ".join(RELEASES),
                        help="torch releases, separated by spaces")
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help="the JSON file of results (the cache)")
    parser.add_argument("--table", type=Path, default=None,
                        help="the Markdown table (default: beside the book's results only)")
    parser.add_argument("--venv-root", type=Path,
                        default=Path(os.environ.get("VENV_ROOT", ROOT.parent / "venvs")))
    parser.add_argument("--python", default=os.environ.get("PYTHON", "python3"))
    parser.add_argument("--keep", action="store_true", default=os.environ.get("KEEP") == "1",
                        help="keep each release's venv after its run")
    parser.add_argument("--notebooks", nargs="*", help="only these notebooks (default: the toc's)")
    parser.add_argument("--torch-index", default=os.environ.get("TORCH_INDEX"),
                        help="install torch from this package index (default: PyPI)")
    parser.add_argument("--min-free-gb", type=float, default=FREE_GB_NEEDED,
                        help="refuse to build a venv with less free disk than this")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 if a chapter fails or prints new text on stderr")
    parser.add_argument("--known-failure", action="append", default=[],
                        metavar="RELEASE:CHAPTER",
                        help="with --strict, a failure that does not fail the run "
                             "(reported all the same), e.g. 2.5.1:05_variance_pruning")
    args = parser.parse_args()
    releases = args.versions.split()
    table = args.table or (TABLE if args.results == RESULTS else None)
    data = load(args.results)
    failures, passed = [], 0
    started_all = time.monotonic()
    venv = None
    try:
        for release in releases:
            # read for each release: chapters added meanwhile are run on the next ones
            notebooks = ([Path(p).resolve() for p in args.notebooks] if args.notebooks
                         else toc_notebooks())
            row = data.setdefault(release, {"chapters": {}})
            todo = [nb for nb in notebooks
                    if row["chapters"].get(nb.stem, {}).get("key") != notebook_key(nb)]
            if not todo:
                print(f"torch {release}: every chapter already run on its current code", flush=True)
            else:
                started = time.monotonic()
                print(f"torch {release}: building the venv", flush=True)
                venv = build_venv(release, args.venv_root, args.python,
                                  args.torch_index, args.min_free_gb)
                print(f"torch {release}: venv ready in {time.monotonic() - started:.0f} s", flush=True)
                probe = subprocess.run([venv / "bin" / "python", "-c", PROBE],
                                       capture_output=True, text=True, check=True,
                                       env=clean_environment(venv))
                row["probe"] = json.loads(probe.stdout.strip().splitlines()[-1])
                for nb in todo:
                    key = notebook_key(nb)
                    result = run_chapter(venv, nb)
                    result.update(key=key, date=datetime.date.today().isoformat())
                    row["chapters"][nb.stem] = result
                    save(data, args.results)
                    if table:
                        write_table(data, table, releases)
                    print(f"torch {release}: {nb.stem}: {result['status']} "
                          f"{result.get('cell', '')} {result.get('error', '')} "
                          f"{result.get('line', '')} "
                          f"({result['seconds']} s)".rstrip(), flush=True)
                    for index, text in result.get("new_stderr", []):
                        print(f"    new stderr in cell {index}: {text}", flush=True)
            for nb in notebooks:
                result = row["chapters"].get(nb.stem, {})
                if result.get("status") != "pass" or result.get("new_stderr"):
                    failures.append(f"{release} {nb.stem}")
                else:
                    passed += 1
    finally:
        if venv is not None and not args.keep:
            shutil.rmtree(venv, ignore_errors=True)
    save(data, args.results)
    if table:
        write_table(data, table, releases)
    print(f"wall time {time.monotonic() - started_all:.0f} s; failed or new stderr: "
          + (", ".join(failures) if failures else "none"))
    print(f"chapters: {passed} passed, {len(failures)} failed")
    known = {entry.replace(":", " ") for entry in args.known_failure}
    unexpected = [f for f in failures if f not in known]
    if known & set(failures):
        print("known failures (not failing this run): "
              + ", ".join(sorted(known & set(failures))))
    sys.exit(1 if unexpected and args.strict else 0)


if __name__ == "__main__":
    main()

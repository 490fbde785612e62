"""The pruning study: every comparison of a chapter, over many seeds.

    python -m tools.study                        # every chapter with a study
    python -m tools.study --chapters 05 --jobs 2 # one chapter, two processes

A chapter with a study defines, in its cells tagged `export`:

- STUDY_PLAN = dict(seeds=N, variants={name: config}, data=function): the
  seeds, the configurations (e.g. the chapter's and one at twice the
  width) and the function that builds the data;
- study_seed(seed, config, data): what to store of one seed, as plain
  numbers, lists and dicts (JSON).

Each (variant, seed) is run by the chapter's own code, loaded from its
export cells, with one thread, deterministic algorithms and PyTorch's CPU
kernels held at AVX2 (the level of the stored outputs; `make study` sets
it). Results go to book/_data/study/<chapter>.json, written after each
seed: a stopped run resumes, and a rerun runs only the seeds whose key (the
export code a seed's run can reach, without its comments and docstrings;
the pins of STUDY_PACKAGES, the configuration, the seed, the torch and the
kernel level) changed: a statistic added for the tables stales no seed. `make generate` then writes the stored study into the chapter (cells
marked `"study": "<chapter>"`) as data, one line of numbers per seed (as
study_seed rounded them), which the chapter reads into `STUDY` and draws
its tables from; the chapter re-runs one seed live and holds it to the
stored one within the spread of the stored seeds (bit for bit only on the
machine that made the study).
"""
import argparse
import ast
import concurrent.futures
import hashlib
import json
import os
import sys
import time

from tools.book import CPU_KERNELS, DATA, pins, toc_notebooks
from tools.codekey import statements
from tools.exports import export_cells, load_exports

RESULTS = DATA / "study"
KERNELS = "AVX2"
# Names each chapter with a study defines for itself (like CONFIG): the
# one-name-one-meaning test lets them differ between chapters.
PROTOCOL = ("STUDY_PLAN", "study_seed", "study_verdicts")


# Seeds that the study never stores, run by `make study-check` (after the
# stored ones: seeds N to N + NEW_SEEDS - 1 of a plan of N seeds) to show
# that no verdict changes direction on seeds it has not seen.
NEW_SEEDS = 10


def results_path(stem, new=False):
    return RESULTS / f"{stem}{'.new_seeds' if new else ''}.json"


def load(stem, new=False):
    path = results_path(stem, new)
    return json.loads(path.read_text()) if path.is_file() else {}


def save(stem, data, new=False):
    path = results_path(stem, new)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def chapters_with_a_study():
    """Stems of the toc's chapters whose export cells define STUDY_PLAN."""
    return [path.stem for path in toc_notebooks()
            if any("STUDY_PLAN" in source for _, source in export_cells(path.name))]


def environment():
    """(torch version, kernel level); refuses anything but the study's level."""
    import torch
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    level = torch.backends.cpu.get_cpu_capability()
    unset = {k: v for k, v in CPU_KERNELS.items() if os.environ.get(k) != v}
    if level != KERNELS or unset:
        sys.exit(f"the study runs with PyTorch's CPU kernels at {KERNELS}, this "
                 f"process has {level} and lacks {unset}: run `make study`, which "
                 "sets tools.book.CPU_KERNELS")
    return torch.__version__, level


# The pins that can change a study's numbers: torch-pruning runs the peer's
# rows, scikit-learn ships the digits (torch itself is keyed by its version).
# The book's other pins (the grader, the linters, the page builders) cannot,
# and changing one does not call for a new study.
STUDY_PACKAGES = ("torch", "torch-pruning", "scikit-learn")


def study_pins(pinned=None):
    """{package: version} of requirements.txt's pins that key the study."""
    pinned = pins() if pinned is None else pinned
    return {name: pinned[name] for name in STUDY_PACKAGES if name in pinned}


DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def run_code(stem, text=None):
    """The export statements a seed's run can reach (of the notebook `text`,
    if given): every one but a definition, and the definitions that study_seed
    and those statements name, and that they name in turn."""
    parsed = []
    for _, source in export_cells(f"{stem}.ipynb", text):
        for statement in statements(source):
            try:
                parsed.append((statement, ast.parse(statement).body[0]))
            except (SyntaxError, IndexError):   # kept as text (tools.codekey)
                parsed.append((statement, None))
    named = {node.name: node for _, node in parsed if isinstance(node, DEFINITIONS)}
    todo = {"study_seed"}.union(*[{n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                                  for _, node in parsed
                                  if node is not None and not isinstance(node, DEFINITIONS)])
    reached = set()
    while todo:
        name = todo.pop()
        if name in named and name not in reached:
            reached.add(name)
            todo |= {n.id for n in ast.walk(named[name]) if isinstance(n, ast.Name)}
    return [statement for statement, node in parsed
            if not isinstance(node, DEFINITIONS) or node.name in reached]


def key(stem, variant, config, seed, torch_version):
    """What one stored seed was run on: the export code its run can reach
    (run_code), statement by statement, however it is cut into cells,
    without comments and docstrings (tools.codekey); the pins, the
    configuration, the seed, torch, kernels."""
    code = "\n\0\n".join(run_code(stem))
    text = json.dumps([code, sorted(study_pins().items()), variant, config, seed,
                       torch_version, KERNELS, CPU_KERNELS], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_one(stem, variant, seed):
    """Run one seed of one variant in this process: (record, seconds)."""
    environment()
    chapter = load_exports(f"{stem}.ipynb")
    plan = chapter.STUDY_PLAN
    start = time.monotonic()
    record = chapter.study_seed(seed, plan["variants"][variant], plan["data"]())
    return record, round(time.monotonic() - start, 1)


def seed_range(plan, new=False):
    """The stored seeds of a plan, or the new ones (`make study-check`)."""
    return (range(plan["seeds"], plan["seeds"] + NEW_SEEDS) if new
            else range(plan["seeds"]))


def todo(stem, data, torch_version, new=False):
    """[(variant, seed, key)] whose stored result is missing or stale."""
    chapter = load_exports(f"{stem}.ipynb")
    plan = chapter.STUDY_PLAN
    missing = []
    for variant, config in plan["variants"].items():
        stored = data.get("variants", {}).get(variant, {}).get("seeds", {})
        for seed in seed_range(plan, new):
            wanted = key(stem, variant, config, seed, torch_version)
            if stored.get(str(seed), {}).get("key") != wanted:
                missing.append((variant, seed, wanted))
    return plan, missing


def run_chapter(stem, jobs, new=False):
    torch_version, level = environment()
    data = load(stem, new)
    plan, missing = todo(stem, data, torch_version, new)
    seeds = {str(seed) for seed in seed_range(plan, new)}
    # drop what the plan no longer has (fewer seeds, a variant removed)
    variants = data.setdefault("variants", {})
    for variant in list(variants):
        if variant not in plan["variants"]:
            del variants[variant]
    data.update(chapter=stem, torch=torch_version, kernels=level,
                environment=dict(CPU_KERNELS))
    for variant, config in plan["variants"].items():
        entry = variants.setdefault(variant, {"seeds": {}})
        entry["config"] = json.loads(json.dumps(config))
        for seed in list(entry["seeds"]):
            if seed not in seeds:
                del entry["seeds"][seed]
    what = "new seed runs (never stored in the chapter's study)" if new else "seed runs"
    print(f"{stem}: {len(missing)} {what} to do", flush=True)
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_one, stem, variant, seed): (variant, seed, wanted)
                   for variant, seed, wanted in missing}
        for future in concurrent.futures.as_completed(futures):
            variant, seed, wanted = futures[future]
            record, seconds = future.result()
            variants[variant]["seeds"][str(seed)] = dict(key=wanted, seconds=seconds,
                                                         record=record)
            save(stem, data, new)
            print(f"{stem}: {variant}, seed {seed}: {seconds} s", flush=True)
    save(stem, data, new)
    return data


def study_data(stem, new=False):
    """{variant: {seed: record}} of the stored study (of the new seeds of
    `make study-check` if `new`), seeds as ints, in order."""
    data = load(stem, new)
    if not data:
        raise FileNotFoundError(f"no stored {'new seeds' if new else 'study'} for {stem}: "
                                f"run `make {'study-check' if new else 'study'}`")
    return {variant: {int(seed): entry["record"]
                      for seed, entry in sorted(value["seeds"].items(),
                                                key=lambda item: int(item[0]))}
            for variant, value in data["variants"].items()}, data


def direction(verdict):
    """"lower", "higher" or None (indistinguishable)."""
    return verdict if verdict in ("lower", "higher") else None


def compare_verdicts(stored, new):
    """Per family, how the verdicts of two study_verdicts() results relate:
    {family: dict(comparisons, stored (directional verdicts on the stored
    seeds), new (on the new seeds), same, weakened, strengthened, flipped
    (the keys whose directions are opposite))}."""
    report = {}
    for name, family in stored.items():
        rows = family["comparisons"]
        other = new[name]["comparisons"]
        pairs = [(direction(rows[k]["verdict"]), direction(other[k]["verdict"])) for k in rows]
        report[name] = dict(
            comparisons=len(rows),
            stored=sum(a is not None for a, _ in pairs),
            new=sum(b is not None for _, b in pairs),
            same=sum(a == b for a, b in pairs),
            weakened=sum(a is not None and b is None for a, b in pairs),
            strengthened=sum(a is None and b is not None for a, b in pairs),
            flipped=[list(k) if isinstance(k, tuple) else k
                     for k, (a, b) in zip(rows, pairs) if a and b and a != b])
    return report


def check_new_seeds(stem):
    """The verdicts of the stored seeds against those of the new seeds
    alone and of stored and new seeds pooled: {"new": report, "pooled":
    report} (compare_verdicts)."""
    chapter = load_exports(f"{stem}.ipynb")
    data = chapter.STUDY_PLAN["data"]()
    stored, _ = study_data(stem)
    new, _ = study_data(stem, new=True)
    pooled = {variant: {**stored[variant], **new[variant]} for variant in stored}
    verdicts = chapter.study_verdicts(stored, data)
    return {"new": compare_verdicts(verdicts, chapter.study_verdicts(new, data)),
            "pooled": compare_verdicts(verdicts, chapter.study_verdicts(pooled, data))}


def print_check(stem, report):
    """Print a check_new_seeds report; returns the number of flipped verdicts."""
    flips = 0
    for against, families in report.items():
        print(f"{stem}: stored seeds against the {NEW_SEEDS} new seeds"
              + (" alone" if against == "new" else ", pooled with the stored"))
        for name, r in families.items():
            label = ", ".join(name) if isinstance(name, tuple) else name
            print(f"  {label:28s} {r['comparisons']:3d} comparisons: directional "
                  f"{r['stored']:2d} stored, {r['new']:2d} {against}; same {r['same']:2d}, "
                  f"weakened {r['weakened']:2d}, strengthened {r['strengthened']:2d}, "
                  f"flipped {len(r['flipped'])} {r['flipped'] or ''}")
            flips += len(r["flipped"])
    return flips


def leaf_paths(record, path=()):
    """[(path, value)] of a record: each value that is not a dict, with the
    keys that lead to it."""
    if not isinstance(record, dict):
        return [(list(path), record)]
    return [leaf for key, value in record.items() for leaf in leaf_paths(value, (*path, key))]


def study_cell_source(stem):
    """The folded cell that holds the stored study in the chapter, as data:
    a first line (torch, kernel level, environment, and the path of every
    number of a record), then one line per seed (part of the study, variant,
    seed, the numbers in that order), read back by the chapter's read_study."""
    runs, data = study_data(stem)
    seeds = sorted({seed for variant in runs.values() for seed in variant})
    # the new seeds of `make study-check`, for the chapter's closing check
    new = study_data(stem, new=True)[0] if results_path(stem, True).is_file() else {}
    paths = [path for path, _ in leaf_paths(runs["main"][seeds[0]])]
    lines = [json.dumps(dict(torch=data["torch"], kernels=data["kernels"],
                             environment=data.get("environment", {}), paths=paths))]
    for part, stored in (("runs", runs), ("new_seeds", new)):
        for variant, records in stored.items():
            for seed, record in records.items():
                leaves = leaf_paths(record)
                if [path for path, _ in leaves] != paths:
                    raise ValueError(f"{stem}: seed {seed} of {variant} holds other numbers "
                                     "than the first seed's")
                lines.append(json.dumps([part, variant, seed, [v for _, v in leaves]],
                                        separators=(",", ":")))
    return "\n".join([
        f"# @title The stored study: seeds {seeds[0]} to {seeds[-1]} of every method "
        "(written by `make study`), and the new seeds of `make study-check`",
        f"# From book/_data/study/{stem}.json, made by tools/study.py on torch "
        f"{data['torch']}",
        f"# at the {data['kernels']} CPU-kernel level; `make generate` writes this cell.",
        'STUDY = read_study(r"""', *lines, '""")'])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chapters", nargs="*",
                        help="chapter numbers or stems (default: every chapter with a study)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="processes (each runs one seed on one thread)")
    parser.add_argument("--check", action="store_true",
                        help=f"run {NEW_SEEDS} new seeds per chapter (never part of the "
                             "stored study) and fail if a verdict changes direction")
    args = parser.parse_args(argv)
    stems = chapters_with_a_study()
    if args.chapters:
        stems = [s for s in stems if any(s.startswith(c) for c in args.chapters)]
        if not stems:
            sys.exit(f"no chapter with a study matches {args.chapters}")
    start = time.monotonic()
    flips = 0
    for stem in stems:
        run_chapter(stem, args.jobs, new=args.check)
        if args.check:
            flips += print_check(stem, check_new_seeds(stem))
    print(f"study: {len(stems)} chapters in {time.monotonic() - start:.0f} s")
    if flips:
        print(f"{flips} verdicts change direction on new seeds", file=sys.stderr)
    return 1 if flips else 0


if __name__ == "__main__":
    sys.exit(main())

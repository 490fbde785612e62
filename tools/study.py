"""The pruning study: every comparison of a chapter, over many seeds.

    python -m tools.study                        # every chapter with a study
    python -m tools.study --chapters 05 --jobs 2 # one chapter, two processes
    python -m tools.study --rekey                # run nothing: re-key (see below)

A chapter with a study defines, in its cells tagged `export`:

- STUDY_PLAN = dict(seeds=N, variants={name: config}, data=function): the
  seeds, the configurations (e.g. the chapter's and one at twice the
  width) and the function that builds the data;
- study_seed(seed, config, data): what to store of one seed, as plain
  numbers, lists and dicts (JSON).

Each (variant, seed) is run by the chapter's own code, loaded from its
export cells, with one thread, deterministic algorithms and PyTorch's CPU
kernels held at AVX2 (the level of the stored outputs; `make study` sets
it). Results go to book/_generated/study/<chapter>.json, written after each
seed: a stopped run resumes, and a rerun runs only the seeds whose key (the
chapter's export code without its comments and docstrings, the pins of
STUDY_PACKAGES, the configuration, the seed, the torch and the kernel level)
changed. `--rekey` runs nothing: it gives today's key to the stored seeds
whose code differs from today's only in comments and docstrings. `make generate` then writes the folded cell
`STUDY = {...}` into the chapter (cells marked `"study": "<chapter>"`),
from which the chapter draws its tables; the chapter re-runs one seed live
and asserts that it equals the stored one.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import pprint
import sys
import time

from tools.book import BOOK, CPU_KERNELS, GENERATED, pins, toc_notebooks
from tools.codekey import git_versions, normalized
from tools.exports import export_cells, load_exports

RESULTS = GENERATED / "study"
KERNELS = "AVX2"
# Names each chapter with a study defines for itself (like CONFIG): the
# one-name-one-meaning test lets them differ between chapters.
PROTOCOL = ("STUDY_PLAN", "study_seed")


def results_path(stem):
    return RESULTS / f"{stem}.json"


def load(stem):
    path = results_path(stem)
    return json.loads(path.read_text()) if path.is_file() else {}


def save(stem, data):
    path = results_path(stem)
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


def export_code(stem, text=None):
    """The chapter's export code as the key sees it: cell by cell, without
    comments and docstrings (tools.codekey); of the notebook `text` if given."""
    return "\n\0\n".join(normalized(source)
                          for _, source in export_cells(f"{stem}.ipynb", text))


def _key(code, variant, config, seed, torch_version):
    text = json.dumps([code, sorted(study_pins().items()), variant, config, seed,
                       torch_version, KERNELS, CPU_KERNELS], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def key(stem, variant, config, seed, torch_version):
    """What one stored seed was run on: the export code (not its comments
    or docstrings), the pins, the configuration, the seed, torch, kernels."""
    return _key(export_code(stem), variant, config, seed, torch_version)


def legacy_key(stem, variant, config, seed, torch_version, text):
    """The key as it was before comments and docstrings were left out (the
    export cells' text as it is), of the notebook `text`: read by `rekey`."""
    code = "\n\0\n".join(source for _, source in export_cells(f"{stem}.ipynb", text))
    return _key(code, variant, config, seed, torch_version)


def rekey(stem, torch_version):
    """Give the new key to each stored seed that was run on code equal, but
    for comments and docstrings, to today's: its key is the legacy key of a
    version of the notebook (the working tree's or one of its last commits')
    whose export code is today's once normalized. Nothing is run; a seed
    whose code cannot be shown to be today's keeps its key (and stays
    stale). Returns the number of seeds re-keyed."""
    data = load(stem)
    if not data:
        return 0
    today = export_code(stem)
    versions = [text for text in git_versions(BOOK / f"{stem}.ipynb")
                if export_code(stem, text) == today]
    plan = load_exports(f"{stem}.ipynb").STUDY_PLAN
    count = 0
    for variant, config in plan["variants"].items():
        stored = data.get("variants", {}).get(variant, {}).get("seeds", {})
        for seed, entry in stored.items():
            wanted = key(stem, variant, config, int(seed), torch_version)
            if entry.get("key") == wanted:
                continue
            if any(entry.get("key") == legacy_key(stem, variant, config, int(seed),
                                                  torch_version, text)
                   for text in versions):
                entry["key"] = wanted
                count += 1
    if count:
        save(stem, data)
    return count


def run_one(stem, variant, seed):
    """Run one seed of one variant in this process: (record, seconds)."""
    environment()
    chapter = load_exports(f"{stem}.ipynb")
    plan = chapter.STUDY_PLAN
    start = time.monotonic()
    record = chapter.study_seed(seed, plan["variants"][variant], plan["data"]())
    return record, round(time.monotonic() - start, 1)


def todo(stem, data, torch_version):
    """[(variant, seed, key)] whose stored result is missing or stale."""
    chapter = load_exports(f"{stem}.ipynb")
    plan = chapter.STUDY_PLAN
    missing = []
    for variant, config in plan["variants"].items():
        stored = data.get("variants", {}).get(variant, {}).get("seeds", {})
        for seed in range(plan["seeds"]):
            wanted = key(stem, variant, config, seed, torch_version)
            if stored.get(str(seed), {}).get("key") != wanted:
                missing.append((variant, seed, wanted))
    return plan, missing


def run_chapter(stem, jobs):
    torch_version, level = environment()
    data = load(stem)
    plan, missing = todo(stem, data, torch_version)
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
            if int(seed) >= plan["seeds"]:
                del entry["seeds"][seed]
    print(f"{stem}: {len(missing)} seed runs to do", flush=True)
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_one, stem, variant, seed): (variant, seed, wanted)
                   for variant, seed, wanted in missing}
        for future in concurrent.futures.as_completed(futures):
            variant, seed, wanted = futures[future]
            record, seconds = future.result()
            variants[variant]["seeds"][str(seed)] = dict(key=wanted, seconds=seconds,
                                                         record=record)
            save(stem, data)
            print(f"{stem}: {variant}, seed {seed}: {seconds} s", flush=True)
    save(stem, data)
    return data


def study_data(stem):
    """{variant: {seed: record}} of the stored study, seeds as ints, in order."""
    data = load(stem)
    if not data:
        raise FileNotFoundError(f"no stored study for {stem}: run `make study`")
    return {variant: {int(seed): entry["record"]
                      for seed, entry in sorted(value["seeds"].items(),
                                                key=lambda item: int(item[0]))}
            for variant, value in data["variants"].items()}, data


def study_cell_source(stem):
    """The folded cell that holds the stored study in the chapter."""
    runs, data = study_data(stem)
    seeds = sorted({seed for variant in runs.values() for seed in variant})
    literal = pprint.pformat(dict(torch=data["torch"], kernels=data["kernels"],
                                  environment=data.get("environment", {}), runs=runs),
                             width=96, compact=True, sort_dicts=False)
    return "\n".join([
        f"# @title The stored study: seeds {seeds[0]} to {seeds[-1]} of every method "
        "(written by `make study`)",
        f"# From book/_generated/study/{stem}.json, made by tools/study.py on torch "
        f"{data['torch']}",
        f"# at the {data['kernels']} CPU-kernel level; `make generate` writes this cell.",
        f"STUDY = {literal}"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chapters", nargs="*",
                        help="chapter numbers or stems (default: every chapter with a study)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="processes (each runs one seed on one thread)")
    parser.add_argument("--rekey", action="store_true",
                        help="run nothing: give today's key to the stored seeds whose "
                             "code differs from today's only in comments and docstrings")
    args = parser.parse_args(argv)
    stems = chapters_with_a_study()
    if args.chapters:
        stems = [s for s in stems if any(s.startswith(c) for c in args.chapters)]
        if not stems:
            sys.exit(f"no chapter with a study matches {args.chapters}")
    if args.rekey:
        import torch
        for stem in stems:
            print(f"{stem}: {rekey(stem, torch.__version__)} seeds re-keyed")
        return 0
    start = time.monotonic()
    for stem in stems:
        run_chapter(stem, args.jobs)
    print(f"study: {len(stems)} chapters in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

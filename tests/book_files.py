"""Where the book's pages are, read from _toc.yml (the one list of chapters).

Run as a script, it prints the toc's notebooks, one per line, for the
Makefile to hand to nbval.
"""
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"


def toc_entries():
    """Every `root`/`file` entry of _toc.yml, in reading order, as strings."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    entries = [toc["root"]]

    def walk(items):
        for item in items or []:
            if "file" in item:
                entries.append(item["file"])
            walk(item.get("sections"))
            for part in item.get("parts", []):
                walk(part.get("chapters"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return entries


def toc_notebooks():
    """Paths of the toc's notebooks, in reading order."""
    paths = []
    for entry in toc_entries():
        path = ROOT / entry
        if path.suffix != ".ipynb":
            path = path.with_name(path.name + ".ipynb")
        if path.is_file():
            paths.append(path)
    return paths


if __name__ == "__main__":
    for notebook in toc_notebooks():
        print(notebook.relative_to(ROOT))

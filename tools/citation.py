"""The book's "How to cite" text, written from CITATION.cff.

CITATION.cff (Citation File Format 1.2.0) is the one place the citation is
kept; this writes book/_generated/how_to_cite.md from it (a plain-text
citation and a BibTeX entry), which book/references.md includes:
    python -m tools.citation
"""
import re
from pathlib import Path

import yaml

from tools.book import GENERATED, ROOT

CFF = ROOT / "CITATION.cff"
HOW_TO_CITE = GENERATED / "how_to_cite.md"

# The licenses CITATION.cff may name, as a reader knows them.
LICENSE_NAMES = {"CC-BY-4.0": "CC BY 4.0", "MIT": "MIT"}


def read_cff(path=CFF):
    """CITATION.cff as a dict (refuses a file without what a citation needs)."""
    cff = yaml.safe_load(Path(path).read_text())
    for key in ("cff-version", "title", "authors"):
        if not cff.get(key):
            raise ValueError(f"{Path(path).name}: no {key!r}")
    return cff


def author_name(author):
    """A person ('Given Family') or an entity ('name'), as written."""
    if "name" in author:
        return author["name"]
    parts = [author.get("given-names"), author.get("name-particle"),
             author.get("family-names"), author.get("name-suffix")]
    return " ".join(p for p in parts if p)


def bibtex_escape(text):
    """Text with BibTeX's special characters escaped."""
    return re.sub(r"([&%$#_{}])", r"\\\1", str(text))


def bibtex_author(author):
    """An entity in double braces (one name, not split into given/family)."""
    if "name" in author:
        return "{" + bibtex_escape(author["name"]) + "}"
    family = " ".join(p for p in (author.get("name-particle"),
                                  author.get("family-names")) if p)
    given = author.get("given-names", "")
    return bibtex_escape(f"{family}, {given}" if given else family)


def licenses(cff):
    """CITATION.cff's license field as a list of SPDX identifiers."""
    value = cff.get("license") or []
    return [value] if isinstance(value, str) else list(value)


def url(cff):
    return cff.get("url") or cff.get("repository-code") or ""


def year(cff):
    released = cff.get("date-released")
    return str(released)[:4] if released else ""


def citation_key(cff):
    """'Pruning nn.Linear in place: ...' -> 'pruning_nn_linear_in_place'."""
    words = re.findall(r"[a-z0-9]+", cff["title"].split(":")[0].lower())
    return "_".join(words) or "book"


def bibtex(cff):
    """A BibTeX @misc entry for the book."""
    fields = [("title", "{" + bibtex_escape(cff["title"]) + "}"),
              ("author", " and ".join(bibtex_author(a) for a in cff["authors"]))]
    if cff.get("version"):
        fields.append(("version", bibtex_escape(cff["version"])))
    if year(cff):
        fields.append(("year", year(cff)))
    if url(cff):
        fields.append(("url", url(cff)))
    if licenses(cff):
        fields.append(("note", "License: " + bibtex_escape(", ".join(licenses(cff)))))
    width = max(len(name) for name, _ in fields)
    body = ",\n".join(f"  {name.ljust(width)} = {{{value}}}" for name, value in fields)
    return f"@misc{{{citation_key(cff)},\n{body}\n}}\n"


def plain(cff):
    """One sentence: authors. Title (version, year). Address. License."""
    authors = ", ".join(author_name(a) for a in cff["authors"])
    details = ", ".join(p for p in (f"version {cff['version']}" if cff.get("version") else "",
                                    year(cff)) if p)
    text = f"{authors[0].upper()}{authors[1:]}. *{cff['title']}*"
    text += f" ({details})." if details else "."
    if url(cff):
        text += f" <{url(cff)}>."
    if licenses(cff):
        names = ", ".join(LICENSE_NAMES.get(name, name) for name in licenses(cff))
        text += f" License: {names}."
    return text


def how_to_cite(cff):
    """The Markdown that book/references.md includes."""
    return (
        "% Written by `python -m tools.citation` from CITATION.cff: "
        "edit that file, not this one.\n\n"
        f"{plain(cff)}\n\n"
        "As a BibTeX entry:\n\n"
        f"```bibtex\n{bibtex(cff)}```\n\n"
        "The same data, in the Citation File Format, is the repository's "
        "`CITATION.cff`.\n")


def generated():
    """{path: text} of the files this module writes."""
    return {HOW_TO_CITE: how_to_cite(read_cff())}


if __name__ == "__main__":
    for path, text in generated().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")

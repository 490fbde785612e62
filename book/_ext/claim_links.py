"""A claim's marker is a link to the cell that shows it.

A chapter's prose names the code cell whose output shows a sentence and
whose assert checks it: "(asserted: `cell-16`)" (tools/claims.py reads the
same markers and tests them). A reader cannot see notebook cell ids, so
here each code cell of a notebook page gets its id as an anchor
(`code-ID`), and the cell id of each marker becomes a link to that anchor.
"""
import re

import nbformat
from docutils import nodes

MARKED = re.compile(r"(?:shown|asserted): $")


def link_markers(app, doctree):
    path = str(app.env.doc2path(app.env.docname))
    if not path.endswith(".ipynb"):
        return
    cells = nbformat.read(path, as_version=4).cells
    ids = set()
    for node in doctree.findall(nodes.container):
        if node.get("nb_element") == "cell_code" and cells[node["cell_index"]].get("id"):
            ids.add(cells[node["cell_index"]]["id"])
            node["ids"].append(f"code-{cells[node['cell_index']]['id']}")
    for literal in list(doctree.findall(nodes.literal)):
        before = literal.parent[literal.parent.index(literal) - 1] \
            if literal.parent.index(literal) else None
        if literal.astext() in ids and isinstance(before, nodes.Text) \
                and MARKED.search(before.astext()):
            link = nodes.reference("", "", internal=True, refuri=f"#code-{literal.astext()}",
                                   classes=["claim-cell"])
            literal.replace_self(link)
            link += literal


def setup(app):
    app.connect("doctree-read", link_markers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""Cell outputs that keep their shape.

book.css wraps every text output, so that the end of a long error message
shows on a phone. Text laid out in columns (a table printed with padded
fields, a listing with line numbers, a list of labels and values) loses its
columns when wrapped: such an output gets the class `aligned-output`, and
book.css keeps its lines whole, scrolling in their own box with a shadow at
the edge that hides more.

Which outputs are aligned is decided here, when the book is built, from the
text alone (no mark on the cells): an output is aligned when at least two of
its lines have a run of two or more spaces between two words, which is how
columns are padded, and prose is not. Error outputs (tracebacks) always wrap.
"""
import re

from docutils import nodes

PADDED = re.compile(r"\S {2,}\S")
ALIGNED = "aligned-output"


def is_aligned(text):
    """True for text laid out in columns (see the module's docstring)."""
    return sum(1 for line in text.splitlines() if PADDED.search(line)) >= 2


def mark_aligned_outputs(app, doctree, docname):
    for block in doctree.findall(nodes.literal_block):
        classes = block.get("classes", [])
        if "output" in classes and "traceback" not in classes \
                and is_aligned(block.astext()) and ALIGNED not in classes:
            classes.append(ALIGNED)


def setup(app):
    app.connect("doctree-resolved", mark_aligned_outputs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

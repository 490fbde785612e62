"""Code as a cache key sees it: what runs, without comments and docstrings.

The study (tools/study.py) and the versions matrix (tools/versions.py) are
cached by a hash of the chapters' code. A comment or a docstring cannot
change what a cell computes, so neither may make a stored result stale:
each cell is parsed with `ast` and unparsed without its docstrings
(comments, `# @title` lines among them, do not survive the parse).

IPython lines (`%xmode Minimal`, `!pip ...`) are not Python: each is kept,
as a call that names its text, in its place. A cell that still does not
parse (a cell magic such as `%%bash`, a syntax error on purpose) is keyed by
its text as it is.
"""
import ast
import functools
import hashlib


MAGIC_CALL = "__ipython_line__"


def _python(source):
    """`source` with each IPython line replaced by a call naming its text."""
    lines = []
    for line in source.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            indent = line[:len(line) - len(stripped)]
            line = f"{indent}{MAGIC_CALL}({stripped.rstrip()!r})"
        lines.append(line)
    return "\n".join(lines)


def _is_docstring(node):
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str))


def _without_docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.body and _is_docstring(node.body[0]):
                node.body = node.body[1:] or [ast.Pass()]
    # a cell's leading string is its docstring, unless it is the cell's only
    # statement: then it is the value the cell shows
    if len(tree.body) > 1 and _is_docstring(tree.body[0]):
        tree.body = tree.body[1:]
    return tree


def normalized(source):
    """The code of one cell as the keys see it: equal for two cells that
    differ only in comments, docstrings and layout."""
    if not isinstance(source, str):
        raise TypeError(f"normalized() takes a cell's source text, got {type(source).__name__}")
    return _normalized(source)


@functools.lru_cache(maxsize=4096)  # `make generate` keys each chapter more than once
def _normalized(source):
    try:
        tree = ast.parse(_python(source))
    except SyntaxError:
        return "\0text\0" + source
    return ast.unparse(_without_docstrings(tree))


def statements(source):
    """The top-level statements of one cell as the keys see them (as
    `normalized`), one string each: equal for code cut into cells otherwise."""
    try:
        tree = ast.parse(_python(source))
    except SyntaxError:
        return ["\0text\0" + source]
    return [ast.unparse(node) for node in _without_docstrings(tree).body]


def digest(text):
    return hashlib.sha256(text.encode()).hexdigest()[:16]


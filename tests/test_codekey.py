"""Cache keys see code, not comments or docstrings (tools/codekey.py)."""
import pytest

from tools.codekey import normalized

CELL = '''import torch


def grow(x, by=2):
    """Grow x."""
    # twice, by default
    return x * by  # the product


class Box:
    """A box."""

    size = 3
'''


@pytest.mark.parametrize("same", [
    CELL.replace('"""Grow x."""', '"""Grow x, a tensor."""'),
    CELL.replace("# twice, by default", "# double it"),
    CELL.replace("  # the product", ""),
    CELL.replace('    """A box."""\n', ""),
    '"""The cell\'s own docstring."""\n' + CELL,
    "# @title A title\n" + CELL,
    CELL.replace("\n\n\nclass", "\nclass"),
], ids=["docstring", "comment", "trailing comment", "class docstring removed",
        "cell docstring", "title", "blank lines"])
def test_comments_docstrings_and_layout_leave_the_code_as_it_is(same):
    assert normalized(same) == normalized(CELL)


@pytest.mark.parametrize("other", [
    CELL.replace("by=2", "by=3"),
    CELL.replace("x * by", "by * x"),
    CELL.replace("size = 3", "size = 4"),
    CELL.replace("import torch", "import torch as t"),
    CELL + "print('done')\n",
], ids=["default", "operands", "constant", "import", "statement added"])
def test_any_code_change_changes_it(other):
    assert normalized(other) != normalized(CELL)


def test_a_function_of_a_docstring_alone_still_has_a_body():
    assert normalized('def f():\n    """Only this."""\n') == "def f():\n    pass"
    assert normalized('def f():\n    """Only this."""\n') != normalized("def f():\n    return 1")


def test_a_cell_that_only_shows_a_string_keeps_it():
    assert normalized('"shown"') != normalized('"other"')


def test_ipython_lines_are_kept_in_their_place():
    base = normalized("%xmode Minimal\nprint(1)")
    assert base == normalized("%xmode Minimal  \nprint(1)  # one")
    assert base != normalized("%xmode Plain\nprint(1)")
    assert base != normalized("print(1)\n%xmode Minimal")
    assert normalized("!pip install x\nprint(1)") != normalized("print(1)")


def test_a_cell_that_does_not_parse_is_keyed_by_its_text():
    assert normalized("%%bash\necho 1") != normalized("%%bash\necho 1  # one")
    assert normalized("def (:") != normalized("def ((:")


def test_only_text_is_accepted():
    with pytest.raises(TypeError, match="takes a cell's source text"):
        normalized(["print(1)"])

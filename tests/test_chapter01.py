"""Chapter 1: the error text is stored and the intro's snippets are true."""
import re

import pytest
import torch

from tools.book import BOOK, THE_ERROR
from tools.exports import load_exports



def test_the_exact_error_is_a_stored_output(notebooks):
    chapter = next(nb for p, nb in notebooks.items() if p.name.startswith("01_"))
    errors = [o for c in chapter.cells if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert THE_ERROR in [f"{e.ename}: {e.evalue}" for e in errors]
    assert ("NameError", "name 'nn' is not defined") in [
        (e.ename, e.evalue) for e in errors]


def intro_snippets():
    """(the failing snippet, the fix) of the intro, told apart by their code."""
    text = (BOOK / "intro.md").read_text()
    snippets = re.findall(r"```python\n(.*?)```", text, re.S)
    failing = [s for s in snippets if ".weight.data =" in s]
    fix = [s for s in snippets if "torch.nn.Parameter(" in s]
    assert len(snippets) == 2 and len(failing) == len(fix) == 1, snippets
    return failing[0], fix[0]


def test_outcome_is_the_error_and_its_first_line_or_works():
    outcome = load_exports("01_reproduce_the_error.ipynb").outcome
    def fails():
        raise ValueError("first line\nsecond line")
    assert outcome(fails) == "ValueError: first line"
    assert outcome(lambda: None) == "works"
    assert outcome(lambda: [][0]) == "IndexError: list index out of range"
    with pytest.raises(TypeError, match="needs a function to call"):
        outcome("test1")


def test_intro_failing_snippet_fails_with_the_error():
    failing, _ = intro_snippets()
    outcome = load_exports("01_reproduce_the_error.ipynb").outcome
    assert outcome(lambda: exec(failing, {"torch": torch})) == THE_ERROR


@pytest.mark.parametrize("make_optimizer", [
    lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    lambda params: torch.optim.Adam(params, lr=0.1),
], ids=["sgd-momentum", "adam"])
# The sliced grad is a non-contiguous view: PyTorch warns, as chapter 3 explains.
@pytest.mark.filterwarnings("ignore:grad and param do not obey")
def test_intro_del_x_leaves_an_optimizer_that_already_stepped_broken(make_optimizer):
    """The intro: after `del x` the error is gone, but the next step fails."""
    layer = torch.nn.Linear(100, 10)
    optimizer = make_optimizer(layer.parameters())
    x = 5 - torch.sum(layer(torch.ones(100)))
    x.backward()
    optimizer.step()
    del x
    layer.weight.data = layer.weight.data[:, :90]
    layer.weight.grad.data = layer.weight.grad.data[:, :90]
    x = 5 - torch.sum(layer(torch.ones(90)))
    x.backward()                                 # the error is gone
    with pytest.raises(RuntimeError, match="must match the size"):
        optimizer.step()


def test_exercise_3_has_a_dozen_variants_each_with_an_exact_answer(notebooks):
    """Neighbours rarely share a variant, and the check's answer, -2 minus
    one per pass, is exact for each: the same range in the variant cell and
    in the hidden tests, and the gradient adds -1 per pass exactly."""
    chapter = next(nb for p, nb in notebooks.items() if p.name.startswith("01_"))
    cells = {c.get("id"): c.source for c in chapter.cells}
    ranges = {re.search(r"randint\((\d+), (\d+)\)", cells[i]).groups()
              for i in ("exercise-3-variant", "cell-34")}
    assert len(ranges) == 1, ranges
    low, high = map(int, ranges.pop())
    assert high - low + 1 >= 12 and low > 1          # 1 is the book's variant
    weight = torch.zeros(3, requires_grad=True)
    (-weight.sum() * 2).backward()                   # -2, as after test2
    for passes in range(1, high + 1):
        (-weight.sum()).backward()
        if passes >= low:
            assert weight.grad.unique().tolist() == [-2.0 - passes]

"""The intro: found by its error, and its quick fix really works.

The quick fix is read from book/intro.md (the admonition with the class
`quick-fix`), so the page and this test cannot drift apart. Where it shows
in a browser (first screen, phone) is checked by test_browser.py.
"""
import re

import pytest
import torch
import yaml

from tools.book import BOOK, THE_ERROR



def intro_text():
    return (BOOK / "intro.md").read_text()


def quick_fix():
    """The code of the quick-fix box, and the box's whole text."""
    box = re.search(r"````\{admonition\}[^\n]*\n:class:[^\n]*quick-fix[^\n]*\n"
                    r"(.*?)\n````", intro_text(), re.S)
    assert box, "intro.md has no admonition of class quick-fix"
    code = re.search(r"```python\n(.*?)```", box.group(1), re.S)
    assert code, "the quick-fix box holds no python block"
    return code.group(1), box.group(1)


def run_after_the_failing_setup(code):
    """The reader's situation, the old graph still alive, then `code`.

    Returns the namespace, the old weight and the first optimizer."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(100, 10)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    x = 5 - torch.sum(layer(torch.ones(100)))
    x.backward()
    optimizer.step()
    namespace = {"torch": torch, "layer": layer, "optimizer": optimizer, "x": x}
    old_weight = layer.weight
    exec(code, namespace)
    return namespace, old_weight, optimizer


def train_one_step(namespace):
    layer, optimizer = namespace["layer"], namespace["optimizer"]
    before = layer.weight.detach().clone()
    optimizer.zero_grad()
    loss = 5 - torch.sum(layer(torch.ones(layer.in_features)))
    loss.backward()            # the old x is still alive in `namespace`
    optimizer.step()
    return before, layer.weight.detach()


def test_the_title_and_description_carry_the_error():
    text = intro_text()
    front = yaml.safe_load(text.split("---\n")[1])
    description = front["myst"]["html_meta"]["description lang=en"]
    heading = re.search(r"^# (.*)$", text, re.M).group(1)
    for words in ("TBackward0", "invalid gradient"):
        assert words in heading and words in description, words
    assert "nn.Linear" in heading
    assert THE_ERROR in text


def test_the_quick_fix_is_three_to_six_lines_right_under_the_error():
    code, _ = quick_fix()
    lines = [line for line in code.splitlines() if line.strip()]
    assert 3 <= len(lines) <= 6, lines
    text = intro_text()
    error_block = f"```text\n{THE_ERROR}\n```"
    after_error = text[text.index(error_block) + len(error_block):]
    assert after_error.lstrip().startswith("````{admonition}"), after_error[:80]


def test_the_quick_fix_works_while_the_old_graph_is_alive_and_trains():
    code, _ = quick_fix()
    namespace, old_weight, old_optimizer = run_after_the_failing_setup(code)
    layer = namespace["layer"]
    assert layer.weight is not old_weight
    assert layer.weight.shape == (10, 90) and layer.in_features == 90
    assert torch.equal(layer.weight.detach(), old_weight.detach()[:, :90])
    assert namespace["optimizer"] is not old_optimizer
    before, after = train_one_step(namespace)     # no error, and it learns
    assert layer.weight.grad.shape == (10, 90)
    assert not torch.equal(before, after)


def test_without_its_optimizer_line_the_new_weight_never_moves():
    """Why the box's last line is there: the old optimizer is silent."""
    code, _ = quick_fix()
    lines = code.rstrip().splitlines()
    assert lines[-1].startswith("optimizer = "), lines[-1]
    namespace, _, _ = run_after_the_failing_setup("\n".join(lines[:-1]))
    before, after = train_one_step(namespace)
    assert torch.equal(before, after)


@pytest.mark.parametrize("optimizer_line", [
    "optimizer = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)",
    "optimizer = torch.optim.Adam(layer.parameters(), lr=0.1)",
])
def test_the_quick_fix_with_another_optimizer(optimizer_line):
    """'Rebuild the optimizer you use': the same lines with SGD+momentum, Adam."""
    code, _ = quick_fix()
    lines = code.rstrip().splitlines()[:-1] + [optimizer_line]
    namespace, _, _ = run_after_the_failing_setup("\n".join(lines))
    before, after = train_one_step(namespace)
    assert not torch.equal(before, after)

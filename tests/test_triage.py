"""Chapter 6's reader of pasted errors (`read_message`, by `MESSAGE_RULES`),
against a table of messages: real ones from public reports (each with its
link) and ones made live on this torch, and a property test over any text.
The same table is pasted into the triage page by tests/test_triage_browser.py."""
import json

import pytest
import torch
from hypothesis import given, settings, strategies as st

from tools import triage
from tools.book import ROOT
from tools.exports import load_exports

ch = load_exports("06_any_layer_any_node.ipynb")
MESSAGES = json.loads((ROOT / "tests" / "data" / "triage_messages.json").read_text())
FIELDS = ("node", "index", "got", "expected")


def expected_reading(message):
    return {key: message[key] for key in FIELDS if key in message and message[key] is not None}


@pytest.mark.parametrize("message", MESSAGES, ids=[m["source"][:60] for m in MESSAGES])
def test_every_message_of_the_table_reads_as_expected(message):
    reading = ch.read_message(message["text"])
    assert (reading.kind, reading.cause) == (message["kind"], message["cause"])
    assert {k: v for k, v in reading.fields.items() if k in FIELDS} == expected_reading(message)
    if "changes" in message:
        changes = ch.shape_changes(reading.fields["got"], reading.fields["expected"])
        assert [list(c) for c in changes] == message["changes"]
    assert str(reading)                         # prints, whatever it read


def test_the_table_covers_every_rule_and_every_cause():
    kinds = {m["kind"] for m in MESSAGES}
    assert {rule["kind"] for rule in ch.MESSAGE_RULES} | {"unknown"} <= kinds
    causes = {m["cause"] for m in MESSAGES}
    assert set(ch.CAUSES) - causes <= {"custom C++"}   # no public report found


def test_real_reports_are_linked():
    real = [m for m in MESSAGES if m["source"].startswith("https://github.com/")]
    assert len(real) >= 8


def test_a_whole_traceback_reads_and_the_last_message_wins_nothing_else():
    traceback = ("Traceback (most recent call last):\n  File \"train.py\", line 10, in "
                 "<module>\n    loss.backward()\n  File \"/usr/lib/torch/_tensor.py\", line "
                 "626, in backward\n" + MESSAGES[0]["text"] + "\n")
    assert ch.read_message(traceback).fields["node"] == "TBackward0"
    wrapped = MESSAGES[0]["text"].replace(" but expected", "\n  but\u00a0expected")
    assert ch.read_message(wrapped).fields["expected"] == [10, 100]


def test_any_node_name_is_read_whole():
    """Namespaces, spaces, angle brackets; the one thing a name cannot hold is
    the word "Function " itself (the reader takes the last one before
    "returned", so that traceback text before the message is never read as
    part of the name)."""
    for node in ["torch::jit::(anonymous namespace)::DifferentiableGraphBackward",
                 "My <lambda> Backward", "ns::Op<float, 2>::backward", "X"]:
        text = (f"Function {node} returned an invalid gradient at index 3 - got [2] but "
                "expected shape compatible with [1, 3]")
        assert ch.read_message(text).fields["node"] == node


TEXTS = st.one_of(
    st.text(max_size=400),
    st.sampled_from([m["text"] for m in MESSAGES]).flatmap(
        lambda t: st.tuples(st.just(t), st.integers(0, len(t)), st.text(max_size=20))
        .map(lambda p: p[0][:p[1]] + p[2] + p[0][p[1]:])),
    st.lists(st.sampled_from(["Function ", "returned an invalid gradient at index ", "[",
                              "]", " - got ", "but expected shape compatible with ", "1",
                              ", ", "s0", "(", ")", "\n", "::", "<", ">", "expected device ",
                              "TensorOptions(", "-"]), max_size=40).map("".join))


@settings(max_examples=400, deadline=None, derandomize=True)
@given(TEXTS)
def test_read_message_never_raises_on_any_text(text):
    reading = ch.read_message(text)
    assert reading.kind in {r["kind"] for r in ch.MESSAGE_RULES} | {"unknown"}
    assert "reader error" not in reading.fields, reading.fields
    assert reading.cause in ch.CAUSES and str(reading)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.one_of(st.integers(), st.floats(), st.binary(max_size=50), st.none(),
                 st.lists(st.integers(), max_size=3)))
def test_read_message_never_raises_on_any_object(value):
    assert ch.read_message(value).kind == "unknown"


def test_not_a_message_is_said_plainly():
    reading = ch.read_message("CUDA out of memory")
    assert str(reading) == "not an autograd validation message: nothing here is read as one"


# --- the messages made live here, on this torch -------------------------------

def backward_error(backward):
    class Custom(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return backward(grad)

    with pytest.raises(RuntimeError) as caught:
        Custom.apply(torch.ones(3, 3, requires_grad=True)).sum().backward()
    return str(caught.value)


@pytest.mark.parametrize("backward,kind", [
    (lambda g: g[:2], "shape"),
    (lambda g: g.to("meta"), "device"),
    (lambda g: g.to_sparse_csr(), "layout"),
    (lambda g: g.to(torch.complex64), "complex"),
    (lambda g: (g, g), "count"),
])
def test_each_check_of_the_engine_made_live_reads_as_its_kind(backward, kind):
    text = backward_error(backward)
    assert ch.read_message(text).kind == kind
    same = [m for m in MESSAGES if m["kind"] == kind and m["source"].startswith("live")]
    if kind != "shape":                      # the table's live row is this message
        assert ch.read_message(same[0]["text"]).kind == kind


def test_a_mask_changed_in_place_reads_as_in_place():
    values = torch.nn.Parameter(torch.randn(3, 4))
    mask = torch.tensor([True, True, False, True, False, False])
    placed = torch.zeros(6, 4).index_put((mask,), values)
    mask[4] = True                                      # in place, not through .data
    with pytest.raises(RuntimeError) as caught:
        placed.sum().backward()
    assert ch.read_message(caught.value).cause == "in-place"


def test_parse_invalid_gradient_refuses_other_kinds_with_what_they_are():
    with pytest.raises(ValueError, match="another device"):
        ch.parse_invalid_gradient(next(m["text"] for m in MESSAGES if m["kind"] == "device"))


# --- the generated table the triage page reads --------------------------------

def test_the_page_reads_the_chapters_rules_and_the_pins_derivatives():
    rules = triage.triage_rules()
    assert rules["message_rules"] == ch.MESSAGE_RULES
    assert rules["node_rules"] == ch.NODE_RULES and rules["space"] == ch.SPACE
    assert {k: v["text"] for k, v in rules["causes"].items()} == \
        {k: text for k, (text, _) in ch.CAUSES.items()}
    nodes = rules["nodes"]
    assert nodes["TBackward0"] == ["t", [["self", False]]]
    assert nodes["ConvolutionBackward0"][1][1] == ["weight", False]
    assert nodes["CatBackward0"] == ["cat", [["tensors", True]]]
    assert len(nodes) > 500


def test_each_cause_links_an_existing_heading_of_chapter_6():
    for key, cause in triage.triage_rules()["causes"].items():
        assert (cause["href"] is None) == (key == "unknown")


def test_a_missing_heading_is_refused():
    namespace, notebook = triage.rules_namespace()
    with pytest.raises(LookupError, match="no single heading 'Nowhere'"):
        triage.section_links({"x": ("text", "Nowhere")}, notebook)


def test_the_node_table_is_read_under_the_pinned_torch_only(monkeypatch):
    monkeypatch.setattr(triage, "torch_pin", lambda: "0.0.1")
    with pytest.raises(RuntimeError, match="torch 0.0.1's derivatives.yaml"):
        triage.node_table()

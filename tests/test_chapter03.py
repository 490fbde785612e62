"""Chapter 3: the graph helpers, and the pictures stored in the chapter."""
import gc

import graphviz
import nbformat
import pytest
import torch
from torchviz import make_dot

from tools.book import BOOK
from tools.exports import load_exports

NOTEBOOK = "03_what_holds_the_old_shape.ipynb"
ch = load_exports(NOTEBOOK)


def loss(layer, n_inputs):
    return 5 - torch.sum(layer(torch.ones(n_inputs)))


def red_lines(dot):
    return [line for line in dot.body if " color=red" in line]


@pytest.fixture
def test1_situation():
    """test1 up to its second forward pass: both losses alive."""
    layer = torch.nn.Linear(100, 10)
    old_loss = loss(layer, 100)
    old_loss.backward()
    layer.weight.data = layer.weight.data[:, :90]
    layer.weight.grad.data = layer.weight.grad.data[:, :90]
    return layer, old_loss, loss(layer, 90)


def test_this_torch_exposes_recorded_shapes():
    """Otherwise the chapter's guarded assertions would be skipped."""
    node = torch.ones(1, requires_grad=True).mul(2).grad_fn
    assert hasattr(node, "_input_metadata")
    assert hasattr(torch.autograd.graph, "get_gradient_edge")


def test_healthy_graph_has_nothing_red():
    layer = torch.nn.Linear(100, 10)
    params = dict(layer.named_parameters())
    dot = ch.annotated_graph(loss(layer, 100), params, ["loss"])
    assert red_lines(dot) == []
    assert ch.stale_accumulators(loss(layer, 100), params) == []
    assert "recorded [10, 100]" in dot.source and "current  [10, 100]" in dot.source


def test_test1_situation_paints_exactly_the_weights_accumulator_red(test1_situation):
    layer, old_loss, new_loss = test1_situation
    params = dict(layer.named_parameters())
    dot = ch.annotated_graph((old_loss, new_loss), params)
    [red] = red_lines(dot)
    assert "weight: AccumulateGrad" in red
    assert "recorded [10, 100]" in red and "current  [10, 90]" in red
    assert ch.stale_accumulators((old_loss, new_loss), params) == ["weight"]
    # each graph alone already reaches the stale node
    assert ch.stale_accumulators(new_loss, params) == ["weight"]


def test_after_del_x_the_new_graph_is_healthy():
    layer = torch.nn.Linear(100, 10)
    x = loss(layer, 100)
    x.backward()
    del x                                   # test2
    layer.weight.data = layer.weight.data[:, :90]
    fresh = loss(layer, 90)
    assert ch.stale_accumulators(fresh, dict(layer.named_parameters())) == []


def test_row_pruning_makes_both_accumulators_stale():
    layer = torch.nn.Linear(100, 10)
    x = loss(layer, 100)
    for param in (layer.weight, layer.bias):
        param.data = param.data[:5]
    params = dict(layer.named_parameters())
    assert sorted(ch.stale_accumulators(x, params)) == ["bias", "weight"]
    assert len(red_lines(ch.annotated_graph(x, params))) == 2


def test_unnamed_leaves_are_labelled_leaf():
    layer = torch.nn.Linear(3, 2)
    dot = ch.annotated_graph(loss(layer, 3), {})
    assert dot.source.count("leaf: AccumulateGrad") == 2


def test_annotated_graph_validates_its_arguments():
    layer = torch.nn.Linear(3, 2)
    x = loss(layer, 3)
    with pytest.raises(TypeError, match="dict"):
        ch.annotated_graph(x, [layer.weight])
    with pytest.raises(ValueError, match="grad_fn"):
        ch.annotated_graph(torch.ones(2), {})
    with pytest.raises(TypeError, match="tensor"):
        ch.annotated_graph("x", {})
    with pytest.raises(ValueError, match="one name per output"):
        ch.annotated_graph(x, {}, ["a", "b"])


def test_stable_dot_gives_the_same_source_for_the_same_graph():
    def drawing():
        layer = torch.nn.Linear(4, 3)
        return make_dot(loss(layer, 4), params=dict(layer.named_parameters()))
    first, second = drawing(), drawing()
    assert first.source != second.source            # raw ids differ
    stable = ch.stable_dot(first)
    assert stable.source == ch.stable_dot(second).source
    assert "\tn0 [label=" in stable.source
    assert first.body != stable.body                # a copy, the input is intact


def test_node_labels_names_what_the_picture_shows():
    layer = torch.nn.Linear(4, 3)
    labels = ch.node_labels(make_dot(loss(layer, 4),
                                     params=dict(layer.named_parameters())))
    assert labels == ["()", "RsubBackward1", "SumBackward0", "ViewBackward0",
                      "AddmmBackward0", "bias (3)", "AccumulateGrad", "TBackward0",
                      "weight (3, 4)", "AccumulateGrad"]


def test_stable_dot_refuses_what_is_not_a_digraph():
    with pytest.raises(TypeError, match="Digraph"):
        ch.stable_dot("digraph {}")
    assert isinstance(ch.stable_dot(graphviz.Digraph()), graphviz.Digraph)


def test_accumulator_helpers_find_the_same_node(test1_situation):
    layer, old_loss, new_loss = test1_situation
    node = ch.grad_accumulator(layer.weight)
    assert ch.accumulator_of(old_loss, layer.weight) is node
    assert ch.accumulator_of(new_loss, layer.weight) is node
    assert ch.accumulator_of(new_loss, torch.ones(2, requires_grad=True)) is None
    assert ch.recorded_input_shape(node) == [10, 100]
    with pytest.raises(ValueError, match="leaf"):
        ch.grad_accumulator(new_loss)
    with pytest.raises(ValueError, match="leaf"):
        ch.grad_accumulator(torch.ones(2))


def test_probe_dies_with_the_graph_and_not_before():
    layer = torch.nn.Linear(3, 2)
    x = loss(layer, 3)
    alive = ch.attach_probe(ch.grad_accumulator(layer.weight))
    gc.collect()
    assert alive() is not None
    del x
    assert alive() is None
    with pytest.raises(TypeError, match="autograd node"):
        ch.attach_probe(layer.weight)


def stored_svgs():
    notebook = nbformat.read(BOOK / NOTEBOOK, as_version=4)
    return [output.data["image/svg+xml"] for cell in notebook.cells
            if cell.cell_type == "code" for output in cell.outputs
            if "image/svg+xml" in output.get("data", {})]


def test_stored_pictures_show_the_nodes_and_the_mismatch():
    svgs = stored_svgs()
    assert len(svgs) >= 4
    for svg in svgs:
        assert "TBackward0" in svg and "AccumulateGrad" in svg
    annotated = [svg for svg in svgs if "recorded" in svg]
    assert annotated, "no annotated picture stored"
    assert any("recorded [10, 100]" in svg and "[10, 90]" in svg for svg in annotated)
    assert any('stroke="red"' in svg for svg in annotated)
    assert any('stroke="red"' not in svg for svg in annotated)   # test2: healthy


def loss_positions(dot):
    """Horizontal places of the loss boxes' labels in the rendered picture."""
    import re
    svg = dot.pipe(format="svg").decode()
    return {label: float(x) for x, label in
            re.findall(r'x="([-\d.]+)"[^>]*>([^<]*loss[^<]*)</text>', svg)}


def test_losses_are_drawn_left_to_right_in_the_order_named(test1_situation):
    layer, old_loss, new_loss = test1_situation
    params = dict(layer.named_parameters())
    for names in (("old loss", "new loss"), ("new loss", "old loss")):
        places = loss_positions(ch.annotated_graph((old_loss, new_loss), params, names))
        assert places[names[0]] < places[names[1]], places
    one = ch.annotated_graph(new_loss, params, ["only loss"])
    assert list(loss_positions(one)) == ["only loss"]
    assert not any("invis" in line for line in one.body)

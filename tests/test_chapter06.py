"""Chapter 6: the diagnosis of any "invalid gradient", who holds a graph, and
structural pruning through BatchNorm. The helpers come from the chapter's
`export` cells."""
import copy
import json
import re
from pathlib import Path

import nbformat
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch import nn

from tools.book import BOOK
from tools.exports import load_exports

NOTEBOOK = "06_any_layer_any_node.ipynb"
ch = load_exports(NOTEBOOK)
FAST = settings(max_examples=25, derandomize=True, deadline=None)


def failing_backward(output):
    with pytest.raises(RuntimeError, match="invalid gradient") as caught:
        output.backward()
    return caught.value


# --- reading the message ------------------------------------------------------

def test_parse_reads_node_index_and_both_shapes_old_and_new_spellings():
    new = ("Function ConvolutionBackward0 returned an invalid gradient at index 1 - "
           "got [4, 5, 3, 3] but expected shape compatible with [4, 8, 3, 3]")
    old = ("Function CatBackward returned an invalid gradient at index 0 - got "
           "[84, 256, 3, 3, 6] but expected shape compatible with [84, 256, 3, 3, 8] "
           "(validate_outputs at /pytorch/torch/csrc/autograd/engine.cpp:472)")
    assert ch.parse_invalid_gradient(new) == (
        "ConvolutionBackward0", 1, [4, 5, 3, 3], [4, 8, 3, 3])
    assert ch.parse_invalid_gradient(RuntimeError(old)) == (
        "CatBackward", 0, [84, 256, 3, 3, 6], [84, 256, 3, 3, 8])
    scalar = ch.parse_invalid_gradient(
        "Function X returned an invalid gradient at index 2 - got [] but "
        "expected shape compatible with [1]")
    assert (scalar.got, scalar.expected) == ([], [1])


def test_parse_refuses_other_messages_and_types():
    with pytest.raises(ValueError, match="not an 'invalid gradient' shape message: not a "
                                         "message these rules read"):
        ch.parse_invalid_gradient("The size of tensor a (100) must match")
    with pytest.raises(TypeError):
        ch.parse_invalid_gradient(42)


def make_test1_situation():
    layer = nn.Linear(100, 10)
    old = 5 - torch.sum(layer(torch.ones(100)))
    layer.weight.data = layer.weight.data[:, :90]
    new = 5 - torch.sum(layer(torch.ones(90)))
    return layer, old, new


def test_diagnosis_of_test1_is_a_stale_weight():
    layer, old, new = make_test1_situation()
    error = failing_backward(new)
    diagnosis = ch.diagnose_invalid_gradient(error, new, layer)
    assert diagnosis.cause == "stale accumulator"
    assert diagnosis.tensor == "parameter 'weight'"
    assert (diagnosis.recorded, diagnosis.current) == ([10, 100], [10, 90])
    assert "A new optimizer does not help" in str(diagnosis)
    without_model = ch.diagnose_invalid_gradient(error, [new])
    assert without_model.cause == "stale accumulator"
    assert without_model.tensor == "parameter 'an unnamed leaf of shape [10, 90]'"


class DropsColumns(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight):
        return weight * 2

    @staticmethod
    def backward(ctx, grad):
        return grad[:, :-2] * 2


def test_a_custom_function_is_blamed_not_a_stale_accumulator_elsewhere():
    layer = nn.Linear(5, 4)
    old = layer(torch.ones(5)).sum()
    layer.bias.data = layer.bias.data[:2]          # stale, but not on the edge
    penalty = DropsColumns.apply(layer.weight).sum()
    diagnosis = ch.diagnose_invalid_gradient(failing_backward(penalty), penalty, layer)
    assert diagnosis.cause == "custom autograd.Function"
    assert diagnosis.tensor == "parameter 'weight'"
    assert diagnosis.recorded == diagnosis.current == [4, 5]
    del old


def test_a_reused_non_leaf_is_not_called_a_stale_accumulator():
    weight = nn.Parameter(torch.randn(8, 4))
    cached = weight * 1.0
    cached.data = cached.data[:6]
    total = cached.sum()
    diagnosis = ch.diagnose_invalid_gradient(failing_backward(total), total)
    assert diagnosis.cause == "reused non-leaf"
    assert diagnosis.current is None and diagnosis.recorded == [8, 4]


def test_a_broadcast_parameter_is_found_through_the_add():
    shift = nn.Parameter(torch.zeros(8))
    activations = torch.randn(5, 2, 8)
    old = (activations + shift).sum()
    shift.data = shift.data[:6]
    new = (torch.randn(5, 2, 6) + shift).sum()
    diagnosis = ch.diagnose_invalid_gradient(failing_backward(new), new)
    assert diagnosis.error[:2] == ("AddBackward0", 1)
    assert diagnosis.cause == "stale accumulator" and diagnosis.current == [6]
    del old


def test_of_several_nodes_that_fit_the_most_specific_cause_is_said(monkeypatch):
    a, b, x = nn.Linear(100, 10), nn.Linear(100, 10), torch.ones(100)
    old = (a(x) + b(x)).sum()
    for layer in (a, b):
        layer.weight.data = layer.weight.data[:, :90]
    new = (a(x[:90]) + b(x[:90])).sum()
    causes = iter(["unknown", "stale accumulator"])       # one per fitting node
    real = ch._edge_diagnosis
    monkeypatch.setattr(ch, "_edge_diagnosis",
                        lambda *args: real(*args)._replace(cause=next(causes)))
    assert ch.diagnose_invalid_gradient(failing_backward(new), new).cause == "stale accumulator"
    assert next(causes, "both read") == "both read"
    del old


def test_a_node_not_in_the_outputs_graph_is_reported_unknown():
    layer, old, new = make_test1_situation()
    error = failing_backward(new)
    unrelated = nn.Linear(2, 2)(torch.ones(2)).sum()
    diagnosis = ch.diagnose_invalid_gradient(error, unrelated)
    assert diagnosis.cause == "unknown"
    wrong = ch.diagnose_invalid_gradient(error, "loss")
    assert wrong.cause == "unknown" and wrong.evidence[0] == (
        "outputs must be a tensor or a list of tensors, got str: only its tensors were read")
    unnamed = ch.diagnose_invalid_gradient(error, new, model="model")
    assert unnamed.evidence[0] == "model must be an nn.Module, got str: its tensors were not checked"
    assert unnamed.cause == "stale accumulator"
    assert unnamed.tensor == "parameter 'an unnamed leaf of shape [10, 90]'"


class Unprintable(RuntimeError):
    def __str__(self):
        raise ValueError("no text")


class BrokenModule(nn.Linear):
    def named_modules(self, *args, **kwargs):
        raise RuntimeError("cannot list")


class BrokenSetting(nn.Linear):
    @property
    def out_features(self):
        raise RuntimeError("cannot read out_features")

    @out_features.setter
    def out_features(self, value):
        pass


def test_diagnose_invalid_gradient_never_raises():
    """Whatever it is given, a Diagnosis comes back, saying what it could not use."""
    layer, old, new = make_test1_situation()
    error = failing_backward(new)
    for args in [(None, None), (42, 42), (object(), [new, "x"]), (Unprintable("x"), new),
                 (error, iter([new])), (error, new, 3.5), (error, new, BrokenModule(2, 2)),
                 ("The size of tensor a (3) must match", [], BrokenModule(2, 2)),
                 ("The size of tensor a (3) must match", [], BrokenSetting(2, 2)),
                 (b"bytes", {"a": new}), ("\x00" * 10_000, ())]:
        diagnosis = ch.diagnose_invalid_gradient(*args)
        assert isinstance(diagnosis, ch.Diagnosis) and diagnosis.cause in ch.FIXES, args
        assert str(diagnosis) and diagnosis.fix
    broken = ch.diagnose_invalid_gradient("The size of tensor a (3) must match", [],
                                          BrokenSetting(2, 2))
    assert broken.evidence == (
        "BrokenSetting: not checked (RuntimeError: cannot read out_features)",)
    assert broken.cause == "not a shape message"      # unread is not inconsistent
    del old


# --- who holds the graph ------------------------------------------------------

def test_graph_holders_names_a_list_a_dict_and_a_closure_then_nothing():
    model = nn.Linear(3, 2)
    x = torch.randn(4, 3)
    namespace = {}
    namespace["losses"] = [model(x).sum() for _ in range(2)]
    prediction = model(x)
    namespace["outputs"] = {"prediction": prediction}
    del prediction

    def make_report():
        out = model(x).mean()
        return lambda: float(out)

    namespace["report"] = make_report()
    lines = ch.graph_holders(model.weight, namespace)
    text = "\n".join(lines)
    assert "list 'losses'[0] (of 2 items)" in text and "list 'losses'[1]" in text
    assert "dict 'outputs'['prediction']" in text
    assert "closure variable 'out' of function '<lambda>'" in text
    assert len(lines) == 4
    namespace.clear()
    assert ch.graph_holders(model.weight, namespace) == []


def test_graph_holders_sees_a_traceback_and_refuses_non_leaves():
    model = nn.Linear(3, 2)

    def failing_step():
        loss_value = model(torch.ones(3)).sum()  # noqa: F841  (alive in the traceback)
        raise ValueError("stop")

    try:
        failing_step()
    except ValueError as error:
        kept = error
    assert any("frame of 'failing_step' (kept alive by a traceback)" in line
               for line in ch.graph_holders(model.weight, {}))
    del kept
    assert ch.graph_holders(model.weight, {}) == []
    with pytest.raises(TypeError):
        ch.graph_holders(model.weight * 2, {})


# --- structural pruning ---------------------------------------------------------

@st.composite
def conv_networks(draw):
    """conv -> BatchNorm2d (running stats set) -> ReLU -> conv, and a keep set."""
    seed = draw(st.integers(0, 2**16))
    width = draw(st.integers(1, 7))
    keep = draw(st.lists(st.integers(0, width - 1), min_size=1, max_size=width,
                         unique=True))
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Conv2d(2, width, 3, padding=1, bias=draw(st.booleans())),
                        nn.BatchNorm2d(width), nn.ReLU(),
                        nn.Conv2d(width, 3, 3, padding=1))
    with torch.no_grad():
        net[1].running_mean.normal_()
        net[1].running_var.uniform_(0.5, 2.0)
        net[1].weight.normal_()
        net[1].bias.normal_()
    return net.eval(), keep, torch.randn(2, 2, 5, 5)


@st.composite
def linear_networks(draw):
    """Linear -> BatchNorm1d or a per-feature PReLU -> Linear, and a keep set."""
    seed = draw(st.integers(0, 2**16))
    width = draw(st.integers(1, 8))
    keep = draw(st.lists(st.integers(0, width - 1), min_size=1, max_size=width,
                         unique=True))
    torch.manual_seed(seed)
    middle = draw(st.sampled_from(["batchnorm", "prelu"]))
    between = nn.BatchNorm1d(width) if middle == "batchnorm" else nn.PReLU(width)
    net = nn.Sequential(nn.Linear(3, width), between, nn.Tanh(), nn.Linear(width, 2))
    with torch.no_grad():
        for tensor in [*between.parameters(), *between.buffers()]:
            if tensor.is_floating_point():
                tensor.uniform_(0.5, 2.0)
    return net.eval(), keep, torch.randn(4, 3)


def zeroed_dense(net, consumer_index, keep, width):
    zeroed = copy.deepcopy(net)
    removed = torch.ones(width, dtype=torch.bool)
    removed[keep] = False
    with torch.no_grad():
        zeroed[consumer_index].weight[:, removed] = 0
    return zeroed


@FAST
@given(conv_networks())
def test_pruned_conv_bn_conv_equals_dense_with_removed_channels_zeroed(case):
    net, keep, images = case
    width = net[0].out_channels
    expected = zeroed_dense(net, 3, keep, width)(images)
    assert ch.prune_channels(net, net[0], net[3], keep) == len(keep)
    assert [net[0].out_channels, net[1].num_features, net[3].in_channels] == [len(keep)] * 3
    for tensor in (net[1].weight, net[1].bias, net[1].running_mean, net[1].running_var):
        assert tensor.shape == (len(keep),)
    torch.testing.assert_close(net(images), expected)


@FAST
@given(linear_networks())
def test_pruned_linear_norm_linear_equals_dense_with_removed_features_zeroed(case):
    net, keep, inputs = case
    width = net[0].out_features
    expected = zeroed_dense(net, 3, keep, width)(inputs)
    ch.prune_channels(net, net[0], net[3], keep)
    assert net[0].out_features == net[3].in_features == len(keep)
    torch.testing.assert_close(net(inputs), expected)


def test_optimizers_follow_and_every_weight_trains_with_an_old_graph_alive():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 6, 3), nn.BatchNorm2d(6), nn.ReLU(),
                        nn.Conv2d(6, 2, 3))
    images = torch.randn(4, 3, 7, 7)
    matrices = [p for p in net.parameters() if p.dim() > 1]
    vectors = [p for p in net.parameters() if p.dim() == 1]
    sgd = torch.optim.SGD(matrices, lr=0.1, momentum=0.9)
    adam = torch.optim.Adam(vectors, lr=0.01)
    net(images).square().mean().backward()
    sgd.step(); adam.step()
    old = net(images).sum()                             # alive during the prune
    ch.prune_channels(net, net[0], net[3], [0, 2, 5], [sgd, adam])
    assert {id(p) for p in sgd.param_groups[0]["params"]} == {
        id(p) for p in net.parameters() if p.dim() > 1}
    assert {id(p) for p in adam.param_groups[0]["params"]} == {
        id(p) for p in net.parameters() if p.dim() == 1}
    assert sgd.state[net[3].weight]["momentum_buffer"].shape == (2, 3, 3, 3)
    assert adam.state[net[1].weight]["exp_avg"].shape == (3,)
    before = [p.detach().clone() for p in net.parameters()]
    sgd.zero_grad(); adam.zero_grad()
    net(images).square().mean().backward()
    sgd.step(); adam.step()
    assert all(bool((p != b).all()) for p, b in zip(net.parameters(), before))
    del old


def snapshot(net):
    return [(t, t.detach().clone()) for t in [*net.parameters(), *net.buffers()]]


def unchanged(net, before):
    now = [*net.parameters(), *net.buffers()]
    return len(now) == len(before) and all(
        t is old and torch.equal(t, value) for t, (old, value) in zip(now, before))


def tied_network():
    net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 4), nn.Linear(4, 6))
    net[3].weight = net[0].weight
    return net, 0, 2


def refusals():
    torch.manual_seed(0)
    seq = lambda *m: nn.Sequential(*m)
    return [
        (seq(nn.Linear(4, 6), nn.LayerNorm(6), nn.Linear(6, 2)), 0, 2, [0, 1], None,
         TypeError, "LayerNorm"),
        (seq(nn.Conv2d(3, 6, 3), nn.GroupNorm(2, 6), nn.Conv2d(6, 2, 3)), 0, 2, [0, 1],
         None, TypeError, "GroupNorm"),
        (seq(nn.Conv2d(4, 6, 3, groups=2), nn.Conv2d(6, 2, 3)), 0, 1, [0, 1], None,
         ValueError, "groups"),
        (*tied_network(), [0, 1], None, ValueError, "tied"),
        (seq(nn.Linear(4, 6), nn.Linear(6, 2)), 0, 1, [], None, ValueError, "keep is empty"),
        (seq(nn.Linear(4, 6), nn.Linear(6, 2)), 0, 1, [0, 6], None, ValueError, "keep index 6 is out of range"),
        (seq(nn.Linear(4, 6), nn.Linear(6, 2)), 0, 1, [1, 1], None, ValueError, "duplicate index 1"),
        (seq(nn.Linear(4, 6), nn.Linear(6, 2)), 0, 1, [0.5], None, TypeError, "keep must hold integers"),
        (seq(nn.Linear(4, 6), nn.Linear(6, 2)), 0, 1, torch.tensor([True]), None,
         TypeError, "keep must be an integer tensor"),
        (seq(nn.Linear(4, 6), nn.Linear(6, 2)), 0, 1, torch.tensor([[0, 1]]), None,
         ValueError, "1-D"),
        (seq(nn.Linear(4, 6), nn.Linear(6, 2)), 0, 1, [0], "lbfgs", TypeError, "LBFGS"),
        (seq(nn.Linear(4, 6), nn.Linear(6, 2)), 0, 1, [0], "sgd-name", TypeError,
         "optimizer must be a torch.optim.Optimizer"),
        (seq(nn.Linear(4, 6), nn.BatchNorm1d(5), nn.Linear(6, 2)), 0, 2, [0], None,
         ValueError, "channels along dim 0"),
        (seq(nn.Linear(4, 6), nn.Linear(6, 2)), 1, 0, [0], None, ValueError,
         "not in one nn.Sequential"),
    ]


@pytest.mark.parametrize("case", range(len(refusals())))
def test_refusals_change_nothing(case):
    net, producer, consumer, keep, optimizer, error, message = refusals()[case]
    if optimizer == "lbfgs":
        optimizer = torch.optim.LBFGS(net.parameters())
    before = snapshot(net)
    with pytest.raises(error, match=message):
        ch.prune_channels(net, net[producer], net[consumer], keep, optimizer)
    assert unchanged(net, before)


def test_explicit_between_for_a_module_that_is_not_a_sequential():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.norm, self.down = nn.Linear(3, 5), nn.BatchNorm1d(5), nn.Linear(5, 2)

        def forward(self, x):
            return self.down(torch.relu(self.norm(self.up(x))))

    block = Block().eval()
    with pytest.raises(ValueError, match="pass between"):
        ch.prune_channels(block, block.up, block.down, [0, 1])
    ch.prune_channels(block, block.up, block.down, [0, 3], between=[block.norm])
    assert block.norm.running_mean.shape == (2,)
    assert block(torch.randn(4, 3)).shape == (4, 2)


# --- the notebook ---------------------------------------------------------------

def stored_text():
    notebook = nbformat.read(BOOK / NOTEBOOK, as_version=4)
    return "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code"
                   for o in c.outputs)


def test_stored_outputs_diagnose_four_node_names_besides_tbackward():
    text = stored_text()
    diagnosed = set(re.findall(r"^(\w+) returned a gradient of shape .*\n.*\n"
                               r"(?:  seen: .*\n)*  cause: stale accumulator", text, re.M))
    assert len(diagnosed - {"TBackward0"}) >= 4, diagnosed
    assert text.count("with a new optimizer: Function") == 4
    assert text.count("after fresh_parameters:") == 5     # the reports, torch.compile


def test_the_reports_cited_are_in_the_bibliography():
    notebook = nbformat.read(BOOK / NOTEBOOK, as_version=4)
    prose = "".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    bibliography = (BOOK / "references.bib").read_text()
    for url in ("https://github.com/IntelLabs/distiller/issues/243",
                "https://github.com/yanghr/BSQ/issues/3",
                "https://github.com/marcoancona/TorchPruner/issues/1",
                "https://github.com/VainF/Torch-Pruning/issues/121"):
        assert url in prose and url in bibliography


# --- check_module_shapes: every module's tensors against its settings ---------

def consistent_models():
    return [nn.Linear(4, 3), nn.Conv1d(4, 6, 3, groups=2), nn.Conv2d(3, 6, 3),
            nn.Conv3d(2, 4, 1), nn.ConvTranspose1d(4, 6, 3, groups=2),
            nn.ConvTranspose2d(6, 4, 3), nn.BatchNorm1d(5), nn.BatchNorm2d(5),
            nn.LayerNorm([4, 5]), nn.GroupNorm(2, 6), nn.Embedding(10, 6),
            nn.RNN(4, 6, num_layers=2, nonlinearity="relu"),
            nn.LSTM(4, 6, num_layers=2, bidirectional=True), nn.LSTM(4, 6, proj_size=3),
            nn.GRU(4, 6, bidirectional=True), nn.MultiheadAttention(8, 2),
            nn.MultiheadAttention(8, 2, kdim=5, vdim=3)]


@pytest.mark.parametrize("model", consistent_models(), ids=lambda m: type(m).__name__)
def test_a_consistent_module_has_no_problem(model):
    assert ch.check_module_shapes(model) == []


# (module, tensor to cut, dim, how many to keep, the setting the problem names)
CUTS = [(lambda text=text: eval(text, {"nn": nn}), *rest) for text, *rest in json.loads(
    (Path(__file__).parent / "data" / "module_cuts.json").read_text())["cuts"]]


@pytest.mark.parametrize("make,attr,dim,keep,setting", CUTS,
                         ids=[f"{c[1]}-dim{c[2]}" for c in CUTS])
def test_a_cut_that_misses_a_setting_is_named_with_both_numbers(make, attr, dim, keep, setting):
    module = make()
    tensor = getattr(module, attr)
    right = list(tensor.shape)
    tensor.data = tensor.data.narrow(dim, 0, keep)
    problems = ch.check_module_shapes(module)
    assert len(problems) == 1, problems
    problem = problems[0]
    assert (problem.module, problem.tensor) == (type(module).__name__, attr)
    assert problem.expected == right and problem.actual == list(tensor.shape)
    assert setting in problem.setting and problem.consistent_cut
    text = str(problem)
    assert str(right) in text and str(list(tensor.shape)) in text


def test_an_out_proj_cut_and_an_old_grad_are_named_inside_a_model():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.MultiheadAttention(8, 2))
    model[0](torch.ones(4)).sum().backward()
    model[0].weight.data = model[0].weight.data[:6]
    model[0].bias.data = model[0].bias.data[:6]
    model[0].out_features = 6                        # consistent, but the .grad is old
    model[2].out_proj.weight.data = model[2].out_proj.weight.data[:, :6]
    found = {(p.module, p.tensor) for p in ch.check_module_shapes(model)}
    assert found == {("0", "weight.grad"), ("0", "bias.grad"), ("2", "out_proj.weight"),
                     ("2.out_proj", "weight")}


def test_check_module_shapes_refuses_what_is_not_a_module_and_changes_nothing():
    with pytest.raises(TypeError, match="nn.Module"):
        ch.check_module_shapes("model")
    lstm = nn.LSTM(4, 6)
    lstm.weight_hh_l0.data = lstm.weight_hh_l0.data[:, :4]
    before = {n: p.detach().clone() for n, p in lstm.named_parameters()}
    with pytest.raises(ValueError, match=r"LSTM.weight_hh_l0: \[24, 4\]"):
        ch.assert_module_shapes(lstm)
    assert all(torch.equal(before[n], p) for n, p in lstm.named_parameters())


def found(module):
    return [(p.tensor, p.kind, p.expected, p.actual) for p in ch.check_module_shapes(module)]


def test_the_forgotten_tensor_is_named_not_the_cut_ones():
    """Settings left alone: the tensors outvote them, and the one left behind is named."""
    bn = nn.BatchNorm2d(8)
    for name in ("weight", "bias", "running_var"):
        getattr(bn, name).data = getattr(bn, name).data[:6]
    assert found(bn) == [("running_mean", "tensor", [6], [8]),
                         ("num_features", "setting", [6], [8])]
    assert "set num_features = 6" in str(ch.check_module_shapes(bn)[1])
    norm = nn.LayerNorm(8)
    norm.weight.data = norm.weight.data[:6]
    norm.normalized_shape = (6,)
    assert found(norm) == [("bias", "tensor", [6], [8])]
    norm.normalized_shape = (8,)                   # one against one: the setting decides,
    [problem] = ch.check_module_shapes(norm)       # and the other way is spelled out
    assert (problem.tensor, problem.expected) == ("weight", [8])
    assert "If 6 is meant: cut bias the same way and set normalized_shape[0] = 6" in str(problem)
    for name in ("weight", "bias", "running_mean", "running_var"):
        getattr(bn, name).data = getattr(bn, name).data[:6]
    assert found(bn) == [("num_features", "setting", [6], [8])]


def test_groups_bilinear_and_weight_norm_are_read():
    depthwise = nn.Conv2d(8, 8, 3, groups=8)
    depthwise.weight.data, depthwise.bias.data = depthwise.weight.data[:6], depthwise.bias.data[:6]
    depthwise.in_channels = depthwise.out_channels = 6
    [problem] = ch.check_module_shapes(depthwise)
    assert (problem.tensor, problem.kind, problem.expected, problem.actual) == (
        "groups", "setting", [6], [8])
    assert "set groups = 6" in str(problem)
    grouped = nn.Conv2d(6, 6, 3, groups=2)         # weight [6, 3, 3, 3]
    grouped.groups = 4
    [problem] = ch.check_module_shapes(grouped)
    assert (problem.tensor, problem.expected) == ("groups", [2])
    grouped.in_channels = 5                        # 5 channels in 3s: no groups fits
    [problem] = ch.check_module_shapes(grouped)
    assert (problem.tensor, problem.expected) == ("groups", [])
    assert "no groups fits the weight" in str(problem)
    # groups is read from the side the weight splits: in_channels, or a
    # transposed conv's out_channels (weight [4 or 8, 2, 3, 3] here)
    for conv, side in ((nn.Conv2d(4, 8, 3, groups=2), "in_channels 4"),
                       (nn.ConvTranspose2d(8, 4, 3, groups=2), "out_channels 4")):
        conv.groups = 3
        [problem] = ch.check_module_shapes(conv)
        assert (problem.tensor, problem.expected, problem.actual) == ("groups", [2], [3])
        assert f"and {side}" in str(problem) and "set groups = 2" in str(problem)
    norm, attention = nn.GroupNorm(2, 6), nn.MultiheadAttention(8, 2)
    norm.num_groups, attention.num_heads = 4, 3
    assert [str(p) for p in ch.check_module_shapes(norm) + ch.check_module_shapes(attention)] == [
        "GroupNorm.num_groups = 4: num_channels 6 is not a multiple of num_groups 4: cut whole "
        "groups (or heads), or change num_groups.",
        "MultiheadAttention.num_heads = 3: embed_dim 8 is not a multiple of num_heads 3: cut "
        "whole groups (or heads), or change num_heads."]
    bilinear = nn.Bilinear(4, 5, 3)
    bilinear.weight.data = bilinear.weight.data[:, :, :4]
    assert found(bilinear) == [("weight", "tensor", [3, 4, 5], [3, 4, 4])]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                  # the old weight_norm is deprecated
        old = nn.utils.weight_norm(nn.Linear(4, 8))
    old.weight_g.data = old.weight_g.data[:6]            # torch raises nothing for this
    assert found(old) == [("weight_g", "tensor", [8, 1], [6, 1])]
    new = torch.nn.utils.parametrizations.weight_norm(nn.Linear(4, 8))
    new.parametrizations.weight.original0.data = new.parametrizations.weight.original0.data[:6]
    assert found(new) == [("parametrizations.weight.original0", "tensor", [8, 1], [6, 1])]


def test_a_spectral_norm_is_read_without_its_power_iteration():
    sn = torch.nn.utils.parametrizations.spectral_norm(nn.Linear(4, 8))
    original = sn.parametrizations.weight.original
    original.data = original.data[:6]
    u = sn.parametrizations.weight[0]._u.clone()
    assert found(sn) == [("parametrizations.weight.original", "tensor", [8, 4], [6, 4])]
    assert torch.equal(sn.parametrizations.weight[0]._u, u)      # no forward ran
    diagnosis = ch.diagnose_invalid_gradient("mat1 and mat2 shapes cannot be multiplied", [], sn)
    assert diagnosis.cause == "forward error"
    assert diagnosis.evidence[0].startswith("ParametrizedLinear.parametrizations.weight.original")


class KeepsShape(nn.Module):
    """A parametrization with a right_inverse: its output's shape is not known
    without running it."""
    def forward(self, x):
        return x

    def right_inverse(self, x):
        return x


def test_a_parametrization_that_cannot_be_read_is_said_so_not_passed():
    conv = nn.Conv2d(3, 4, 3)
    torch.nn.utils.parametrize.register_parametrization(conv, "weight", KeepsShape())
    [problem] = ch.check_module_shapes(conv)
    assert (problem.tensor, problem.kind) == ("weight", "unchecked")
    diagnosis = ch.diagnose_invalid_gradient("mat1 and mat2 shapes cannot be multiplied", [], conv)
    assert diagnosis.cause != "forward error"
    assert diagnosis.evidence == ("ParametrizedConv2d.weight: not checked (weight is "
                                  "parametrized, and its shape cannot be read without running "
                                  "the parametrization)",)


# --- advice from evidence ------------------------------------------------------

def test_a_tie_is_seen_and_the_fix_keeps_it():
    lm = nn.ModuleDict({"embed": nn.Embedding(10, 6), "head": nn.Linear(6, 10, bias=False)})
    lm["head"].weight = lm["embed"].weight
    words = torch.tensor([1, 2])
    old = lm["head"](lm["embed"](words)).sum()
    lm["embed"].weight.data = lm["embed"].weight.data[:8]
    new = lm["head"](lm["embed"](words)).sum()
    diagnosis = ch.diagnose_invalid_gradient(failing_backward(new), new, lm)
    assert "tied: held by embed, head" in str(diagnosis)
    assert "so the tie stays" in diagnosis.fix
    untied = nn.ModuleDict({"embed": nn.Embedding(10, 6), "head": nn.Linear(6, 10)})
    old2 = untied["head"](untied["embed"](words)).sum()
    untied["embed"].weight.data = untied["embed"].weight.data[:8]
    new2 = untied["head"](untied["embed"](words)).sum()
    plain = ch.diagnose_invalid_gradient(failing_backward(new2), new2, untied)
    assert "tied" not in str(plain) and plain.fix == ch.FIXES["stale accumulator"]
    del old, old2


def test_a_cache_in_the_loss_is_told_apart_from_an_old_graph_outside_it():
    encoder = nn.Linear(4, 6)
    memory = encoder(torch.randn(3, 4))
    encoder.weight.data = encoder.weight.data[:, :3]
    scores = encoder(torch.randn(2, 3)) @ memory.T
    cached = ch.diagnose_invalid_gradient(failing_backward(scores.sum()), scores, encoder)
    assert any("is part of this loss" in line for line in cached.evidence)
    assert "recompute the cached tensor" in cached.fix
    other = nn.Linear(4, 6)
    outside = other(torch.randn(3, 4)).sum()
    other.weight.data = other.weight.data[:, :3]
    new = other(torch.randn(2, 3)).sum()
    diagnosis = ch.diagnose_invalid_gradient(failing_backward(new), new, other)
    assert any("holds another graph" in line for line in diagnosis.evidence)
    assert "recompute" not in diagnosis.fix
    del outside


def test_a_changed_mask_is_read_from_the_node():
    values = nn.Parameter(torch.randn(3, 4))
    mask = torch.tensor([True, True, False, True, False, False])
    placed = torch.zeros(6, 4).index_put((mask,), values)
    mask.data[4] = True
    diagnosis = ch.diagnose_invalid_gradient(failing_backward(placed.sum()), placed.sum())
    assert diagnosis.cause == "mask changed"
    assert diagnosis.evidence == ("the saved mask 0 selects 4 of 6 entries now",)


def test_any_text_gets_a_diagnosis_and_a_model_is_checked_for_forward_errors():
    gru = nn.GRU(4, 6)
    gru.weight_hh_l0.data = gru.weight_hh_l0.data[:, :4]
    with pytest.raises(RuntimeError) as caught:
        gru(torch.randn(3, 1, 4))
    diagnosis = ch.diagnose_invalid_gradient(caught.value, [], gru)
    assert diagnosis.cause == "forward error"
    assert diagnosis.evidence[0].startswith("GRU.weight_hh_l0: [18, 4]")
    healthy = ch.diagnose_invalid_gradient(caught.value, [], nn.GRU(4, 6))
    assert healthy.cause == "not a shape message"
    assert healthy.evidence == ("every module's tensors agree with its settings, and every "
                                "link between modules that was read agrees",)
    for text in ["", "hello", "Function X returned an invalid gradient at index 0 - "
                 "expected device cpu but got meta"]:
        assert ch.diagnose_invalid_gradient(text, []).cause == "not a shape message"
    device = ch.diagnose_invalid_gradient(
        "Function X returned an invalid gradient at index 0 - expected device cpu but "
        "got meta", [])
    assert "shape" not in device.fix


class Scripted(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 5))

    def forward(self, x):
        return torch.tanh(x @ self.w.t()) * 2


def test_a_torchscript_node_with_a_namespaced_name_is_read_and_followed():
    """TorchScript's backward node is named
    torch::jit::(anonymous namespace)::DifferentiableGraphBackward: the reader
    takes it whole, and the helper follows its edge to the stale parameter."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scripted = torch.jit.script(Scripted())
        x = torch.randn(3, 5)
        for _ in range(3):                      # the profiling runs
            scripted(x).sum().backward()
        old = scripted(x).sum()
    if "DifferentiableGraphBackward" not in old.grad_fn.next_functions[0][0].name():
        pytest.skip("this torch makes no differentiable graph here")
    scripted.w.data = scripted.w.data[:3]
    new = scripted(x).sum()
    error = failing_backward(new)
    reading = ch.read_message(error)
    assert reading.fields["node"] == "torch::jit::(anonymous namespace)::DifferentiableGraphBackward"
    assert reading.cause == "torchscript"
    diagnosis = ch.diagnose_invalid_gradient(error, new, scripted)
    assert diagnosis.cause == "stale accumulator" and diagnosis.tensor == "parameter 'w'"
    del old

"""Chapter 4: the pruning helper and the stale-accumulator diagnostic.

Both are loaded from the chapter's `export` cells, so these tests check the
very code the book shows.
"""
import types
import weakref

import nbformat
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch import nn
from torch.nn.utils import prune as mask_prune

from tools.book import BOOK
from tools.exports import load_exports

ch = load_exports("04_every_way_out.ipynb")

FAST = settings(max_examples=25, derandomize=True, deadline=None)
OPTIMIZERS = {
    "SGD": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    "Adam": lambda params: torch.optim.Adam(params, lr=0.01, amsgrad=True),
    "AdamW": lambda params: torch.optim.AdamW(params, lr=0.01),
}


@st.composite
def pairs(draw):
    """A seeded pair of Linear layers, an input batch and a keep set."""
    n_in = draw(st.integers(1, 7))
    n_hidden = draw(st.integers(1, 9))
    n_out = draw(st.integers(1, 5))
    bias = draw(st.booleans())
    keep = draw(st.lists(st.integers(0, n_hidden - 1), min_size=1,
                         max_size=n_hidden, unique=True))
    seed = draw(st.integers(0, 2**16))
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    first = nn.Linear(n_in, n_hidden, bias=bias)
    second = nn.Linear(n_hidden, n_out, bias=draw(st.booleans()))
    inputs = torch.randn(draw(st.integers(1, 6)), n_in, generator=generator)
    return first, second, inputs, keep


def forward(first, second, inputs):
    return second(torch.tanh(first(inputs)))


def snapshot(*modules):
    """(object, value copy) of every parameter, to check nothing changed."""
    return [(p, p.detach().clone()) for m in modules for p in m.parameters()]


def assert_unchanged(modules, before):
    after = [p for m in modules for p in m.parameters()]
    assert len(after) == len(before)
    for param, (old, value) in zip(after, before):
        assert param is old
        assert torch.equal(param.detach(), value)


@FAST
@given(pairs())
def test_pruned_pair_equals_dense_pair_with_dropped_outgoing_weights_zeroed(pair):
    first, second, inputs, keep = pair
    dropped = torch.ones(first.out_features, dtype=torch.bool)
    dropped[keep] = False
    with torch.no_grad():
        zeroed_second = nn.Linear(second.in_features, second.out_features,
                                  bias=second.bias is not None)
        zeroed_second.load_state_dict(second.state_dict())
        zeroed_second.weight[:, dropped] = 0
        expected = forward(first, zeroed_second, inputs)
    ch.prune_linear_pair(first, second, torch.tensor(keep))
    assert first.out_features == second.in_features == len(keep)
    assert first.weight.shape == (len(keep), first.in_features)
    assert second.weight.shape == (second.out_features, len(keep))
    assert first.weight.is_contiguous() and second.weight.is_contiguous()
    torch.testing.assert_close(forward(first, second, inputs), expected)


@FAST
@given(pairs(), st.sampled_from(sorted(OPTIMIZERS)))
def test_one_step_after_pruning_changes_every_remaining_weight(pair, name):
    first, second, inputs, keep = pair
    optimizer = OPTIMIZERS[name](list(first.parameters()) + list(second.parameters()))
    forward(first, second, inputs).square().sum().backward()
    optimizer.step()
    old_first_grad = first.weight.grad.clone()
    old_state = {k: v.clone() for k, v in optimizer.state[second.weight].items()}

    ch.prune_linear_pair(first, second, keep, optimizer)

    kept = torch.tensor(sorted(keep))
    assert torch.equal(first.weight.grad, old_first_grad[kept])
    for key, value in optimizer.state[second.weight].items():
        if value.dim():
            assert torch.equal(value, old_state[key][:, kept]), key
        else:
            assert torch.equal(value, old_state[key]), key      # step kept
    params = [p for m in (first, second) for p in m.parameters()]
    held = [p for group in optimizer.param_groups for p in group["params"]]
    assert {id(p) for p in held} == {id(p) for p in params}
    for param in params:
        for key, value in optimizer.state[param].items():
            assert value.dim() == 0 or value.shape == param.shape, key

    before = [p.detach().clone() for p in params]
    optimizer.zero_grad()
    (forward(first, second, inputs) - 1).square().sum().backward()
    optimizer.step()
    for param, old in zip(params, before):
        assert bool((param.detach() != old).all())


def test_parameters_get_new_objects_and_unsorted_keep_is_sorted():
    torch.manual_seed(0)
    first, second = nn.Linear(3, 6), nn.Linear(6, 2)
    old_weight, old_bias, old_second_bias = first.weight, first.bias, second.bias
    reference = first.weight.detach().clone()
    assert ch.prune_linear_pair(first, second, [4, 0, 2]) is None
    assert first.weight is not old_weight and first.bias is not old_bias
    assert isinstance(first.weight, nn.Parameter)
    assert second.bias is old_second_bias                       # unchanged
    assert torch.equal(first.weight, reference[[0, 2, 4]])


def test_parameters_the_optimizer_does_not_hold_are_fine():
    torch.manual_seed(0)
    first, second = nn.Linear(3, 6), nn.Linear(6, 2)
    optimizer = torch.optim.SGD(second.parameters(), lr=0.1, momentum=0.9)
    second(first(torch.randn(4, 3))).sum().backward()
    optimizer.step()
    ch.prune_linear_pair(first, second, torch.tensor([1, 3]), optimizer)
    assert optimizer.param_groups[0]["params"][0] is second.weight
    assert first.weight not in optimizer.state
    assert optimizer.state[second.weight]["momentum_buffer"].shape == (2, 2)


def bad_inputs():
    torch.manual_seed(0)
    linear = nn.Linear(6, 4)
    return [
        (nn.Conv1d(3, 6, 1), nn.Linear(6, 2), [0], None, TypeError, "nn.Linear"),
        (nn.Linear(3, 6), "layer", [0], None, TypeError, "nn.Linear"),
        (nn.Linear(3, 6), nn.Linear(5, 2), [0], None, ValueError, "do not chain"),
        (linear, linear, [0], None, ValueError, "two different layers"),
        (nn.Linear(3, 6), nn.Linear(6, 2), [], None, ValueError, "empty"),
        (nn.Linear(3, 6), nn.Linear(6, 2), torch.tensor([], dtype=torch.long),
         None, ValueError, "empty"),
        (nn.Linear(3, 6), nn.Linear(6, 2), [0, 6], None, ValueError, "out of range"),
        (nn.Linear(3, 6), nn.Linear(6, 2), [-1, 2], None, ValueError, "out of range"),
        (nn.Linear(3, 6), nn.Linear(6, 2), [1, 2, 1], None, ValueError, "duplicate"),
        (nn.Linear(3, 6), nn.Linear(6, 2), torch.tensor([[0, 1]]), None,
         ValueError, "1-D"),
        (nn.Linear(3, 6), nn.Linear(6, 2), torch.tensor(1), None, ValueError, "1-D"),
        (nn.Linear(3, 6), nn.Linear(6, 2), torch.tensor([0.0, 1.0]), None,
         TypeError, "integer"),
        (nn.Linear(3, 6), nn.Linear(6, 2), torch.tensor([True, False]), None,
         TypeError, "integer"),
        (nn.Linear(3, 6), nn.Linear(6, 2), [0, 1.5], None, TypeError, "integers"),
        (nn.Linear(3, 6), nn.Linear(6, 2), [True], None, TypeError, "integers"),
        (nn.Linear(3, 6), nn.Linear(6, 2), {0, 1}, None, TypeError, "keep must be"),
        (nn.Linear(3, 6), nn.Linear(6, 2), [0], "adam", TypeError, "Optimizer"),
    ]


@pytest.mark.parametrize("case", range(len(bad_inputs())))
def test_bad_input_raises_and_leaves_model_and_optimizer_untouched(case):
    first, second, keep, optimizer, error, message = bad_inputs()[case]
    modules = [m for m in (first, second) if isinstance(m, nn.Module)]
    params = list({id(p): p for m in modules for p in m.parameters()}.values())
    real_optimizer = torch.optim.Adam(params, lr=0.01)
    for p in params:
        p.grad = torch.ones_like(p)
    real_optimizer.step()
    state_before = {id(p): {k: v.clone() for k, v in real_optimizer.state[p].items()}
                    for p in params}
    before = snapshot(*modules)
    sizes = [(m.in_features, m.out_features) for m in modules if isinstance(m, nn.Linear)]
    with pytest.raises(error, match=message):
        ch.prune_linear_pair(first, second, keep,
                             real_optimizer if optimizer is None else optimizer)
    assert_unchanged(modules, before)
    assert sizes == [(m.in_features, m.out_features) for m in modules
                     if isinstance(m, nn.Linear)]
    assert real_optimizer.param_groups[0]["params"] == params
    for p in params:
        for key, value in real_optimizer.state[p].items():
            assert torch.equal(value, state_before[id(p)][key])


def test_unsliceable_optimizer_state_raises_and_changes_nothing():
    torch.manual_seed(0)
    first, second = nn.Linear(3, 6), nn.Linear(6, 2)
    optimizer = torch.optim.SGD(list(first.parameters()) + list(second.parameters()),
                                lr=0.1, momentum=0.9)
    second(first(torch.randn(4, 3))).sum().backward()
    optimizer.step()
    optimizer.state[second.weight]["row_factor"] = torch.ones(2)   # not sliceable
    before = snapshot(first, second)
    with pytest.raises(ValueError, match="cannot slice"):
        ch.prune_linear_pair(first, second, [0, 1], optimizer)
    assert_unchanged([first, second], before)
    assert optimizer.state[first.weight]["momentum_buffer"].shape == (6, 3)


def test_masked_layer_is_refused():
    first, second = nn.Linear(3, 6), nn.Linear(6, 2)
    mask_prune.l1_unstructured(first, "weight", amount=2)
    with pytest.raises(TypeError, match="not an nn.Parameter"):
        ch.prune_linear_pair(first, second, [0, 1])
    assert first.weight.shape == (6, 3)


def make_test1_situation(n_in=100, n_out=10, kept=90):
    layer = nn.Linear(n_in, n_out)
    x = 5 - torch.sum(layer(torch.ones(n_in)))
    x.backward()
    layer.weight.data = layer.weight.data[:, :kept]
    return layer, x


@pytest.mark.parametrize("n_in,n_out,kept", [(100, 10, 90), (7, 3, 2), (5, 1, 4)])
def test_diagnostic_names_the_weight_and_both_shapes_before_backward(n_in, n_out, kept):
    layer, x = make_test1_situation(n_in, n_out, kept)
    stale = ch.find_stale_accumulators(layer)
    assert [(s.name, s.recorded[0], s.current[0]) for s in stale] == [
        ("weight", [n_out, n_in], [n_out, kept])]
    assert str(stale[0]) == (f"weight: accumulator recorded [{n_out}, {n_in}] float32 "
                             f"cpu, parameter is [{n_out}, {kept}] float32 cpu")
    del x
    assert ch.find_stale_accumulators(layer) == []


def test_diagnostic_compares_dtype_and_device_too(monkeypatch):
    """`.data =` of another dtype or device drops the cached accumulator
    (chapter 3), so a node that recorded float32 for a float64 parameter of
    the same shape is made here."""
    def edge(param):
        meta = types.SimpleNamespace(shape=param.shape, dtype=torch.float32, device=param.device)
        return types.SimpleNamespace(node=types.SimpleNamespace(_input_metadata=[meta]))
    monkeypatch.setattr(torch.autograd.graph, "get_gradient_edge", edge)
    assert [str(s) for s in ch.find_stale_accumulators(nn.Linear(3, 2).double())] == [
        f"{name}: accumulator recorded {shape} float32 cpu, parameter is {shape} float64 cpu"
        for name, shape in (("weight", [2, 3]), ("bias", [2]))]
    assert ch.find_stale_accumulators(nn.Linear(3, 2)) == []


def test_diagnostic_reports_parameters_by_their_model_names():
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
    x = model(torch.ones(4)).sum()
    model[2].weight.data = model[2].weight.data[:, :3]
    model[0].bias.data = model[0].bias.data[:2]
    names = [s.name for s in ch.find_stale_accumulators(model)]
    assert names == ["0.bias", "2.weight"]
    del x


def test_diagnostic_reports_nothing_on_a_healthy_model():
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
    assert ch.find_stale_accumulators(model) == []
    x = model(torch.ones(4)).sum()            # a live graph, shapes unchanged
    assert ch.find_stale_accumulators(model) == []
    model[0].bias.requires_grad_(False)       # skipped, not an error
    assert ch.find_stale_accumulators(model) == []
    del x


class Probe:
    """Stored in a node's metadata: it dies when the node dies."""


def test_diagnostic_leaves_no_accumulator_behind(monkeypatch):
    probes = []
    real_get_edge = torch.autograd.graph.get_gradient_edge

    def get_edge_with_probe(tensor):
        edge = real_get_edge(tensor)
        probe = Probe()
        edge.node.metadata.setdefault("probes", []).append(probe)
        probes.append(weakref.ref(probe))
        return edge

    monkeypatch.setattr(torch.autograd.graph, "get_gradient_edge", get_edge_with_probe)
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
    assert ch.find_stale_accumulators(model) == []
    assert len(probes) == 4
    assert [probe() is None for probe in probes] == [True] * 4
    # The probe itself works: a node a live graph holds keeps its probe alive.
    x = model(torch.ones(4)).sum()
    ch.find_stale_accumulators(model)
    assert all(probe() is not None for probe in probes[4:])
    del x
    assert all(probe() is None for probe in probes)


def test_diagnostic_leaves_nothing_that_breaks_a_later_data_prune():
    layer = nn.Linear(100, 10)
    ch.find_stale_accumulators(layer)
    layer.weight.data = layer.weight.data[:, :90]
    (5 - torch.sum(layer(torch.ones(90)))).backward()       # would fail if one were left
    assert layer.weight.grad.shape == (10, 90)


def test_diagnostic_refuses_what_is_not_a_module():
    with pytest.raises(TypeError, match="nn.Module"):
        ch.find_stale_accumulators([nn.Parameter(torch.ones(2))])


def test_stored_table_recommends_only_the_swapped_in_parameter():
    chapter = nbformat.read(BOOK / "04_every_way_out.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in chapter.cells if c.cell_type == "code"
                   for o in c.outputs)
    rows = [line.split() for line in text.splitlines()
            if line.startswith(("del_x", "set_under_no_grad", "new_parameter",
                                "masked"))]
    recommended = [row[0] for row in rows if row[-1] == "yes"]
    assert recommended == ["new_parameter_swapped_in"]
    assert "RESET_GRAD_ACCUMULATOR = {\"set_\", \"resize_\"}" in text


# --- edges: ties, several optimizers, LBFGS, inference mode, a layer between ---

def three_layers(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 5), nn.Tanh(),
                         nn.Linear(5, 2))


@pytest.mark.parametrize("pass_model", [False, True])
def test_a_tied_parameter_is_refused_and_nothing_changes(pass_model):
    model = three_layers()
    twin = nn.Linear(4, 6)
    twin.weight = model[0].weight                      # tied: one tensor, two users
    owner = nn.ModuleDict({"model": model, "twin": twin})
    before = snapshot(model)
    with pytest.raises(ValueError, match="tied"):
        ch.prune_linear_pair(model[0], model[2], [0, 2, 4],
                             **({"model": owner} if pass_model else {}))
    assert_unchanged([model], before)
    assert twin.weight is model[0].weight and model[0].out_features == 6


def test_a_list_of_optimizers_is_accepted_and_every_weight_keeps_training():
    model = three_layers()
    matrices = [p for p in model.parameters() if p.dim() == 2]
    vectors = [p for p in model.parameters() if p.dim() == 1]
    sgd = torch.optim.SGD(matrices, lr=0.1, momentum=0.9)
    adam = torch.optim.Adam(vectors, lr=0.01)
    inputs = torch.randn(8, 4)
    model(inputs).square().sum().backward()
    sgd.step(); adam.step()
    ch.prune_linear_pair(model[0], model[2], [1, 3, 5], [sgd, adam])
    assert {id(p) for p in sgd.param_groups[0]["params"]} == {
        id(p) for p in model.parameters() if p.dim() == 2}
    assert {id(p) for p in adam.param_groups[0]["params"]} == {
        id(p) for p in model.parameters() if p.dim() == 1}
    assert adam.state[model[0].bias]["exp_avg"].shape == (3,)
    assert sgd.state[model[2].weight]["momentum_buffer"].shape == (5, 3)
    before = [p.detach().clone() for p in model.parameters()]
    sgd.zero_grad(); adam.zero_grad()
    (model(inputs) - 1).square().sum().backward()
    sgd.step(); adam.step()
    assert all(bool((p != b).all()) for p, b in zip(model.parameters(), before))


def test_an_optimizer_left_out_is_refused_and_nothing_changes():
    model = three_layers()
    sgd = torch.optim.SGD([p for p in model.parameters() if p.dim() == 2], lr=0.1)
    adam = torch.optim.Adam([p for p in model.parameters() if p.dim() == 1])
    before = snapshot(model)
    with pytest.raises(ValueError, match="not passed"):
        ch.prune_linear_pair(model[0], model[2], [1, 3, 5], sgd)
    assert_unchanged([model], before)
    assert adam.param_groups[0]["params"][0] is model[0].bias


def test_lbfgs_is_refused_up_front_even_for_a_pair_without_its_first_parameter():
    model = three_layers()
    lbfgs = torch.optim.LBFGS(model.parameters(), history_size=3, max_iter=2)
    inputs = torch.randn(8, 4)

    def closure():
        lbfgs.zero_grad()
        value = model(inputs).square().mean()
        value.backward()
        return value

    lbfgs.step(closure)
    before = snapshot(model)
    with pytest.raises(TypeError, match="LBFGS"):
        ch.prune_linear_pair(model[2], model[4], [0, 1, 2], lbfgs)
    assert_unchanged([model], before)
    lbfgs.step(closure)                                # still usable


@pytest.mark.parametrize("mode", [torch.inference_mode, torch.no_grad])
def test_find_stale_accumulators_works_under_inference_mode_and_no_grad(mode):
    layer, x = make_test1_situation(100, 10, 90)
    with mode():
        stale = ch.find_stale_accumulators(layer)
    assert [(s.name, s.recorded[0], s.current[0]) for s in stale] == [
        ("weight", [10, 100], [10, 90])]
    del x


def test_prune_under_inference_mode_gives_parameters_that_train():
    model = three_layers()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.inference_mode():
        ch.prune_linear_pair(model[0], model[2], [0, 1, 2], optimizer)
    assert not any(p.is_inference() for p in model.parameters())
    model(torch.randn(3, 4)).sum().backward()
    assert model[0].weight.grad.shape == (3, 4)


@pytest.mark.parametrize("between", [
    lambda: nn.BatchNorm1d(6), lambda: nn.LayerNorm(6), lambda: nn.PReLU(6)],
    ids=["BatchNorm1d", "LayerNorm", "PReLU"])
@pytest.mark.parametrize("pass_model", [False, True])
def test_a_per_feature_layer_between_the_pair_is_refused(between, pass_model):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), between(), nn.Tanh(), nn.Linear(6, 2))
    before = snapshot(model)
    with pytest.raises(ValueError, match="between first and second"):
        ch.prune_linear_pair(model[0], model[3], [0, 2, 4],
                             **({"model": model} if pass_model else {}))
    assert_unchanged([model], before)
    model.eval()
    assert model(torch.randn(3, 4)).shape == (3, 2)    # still runs


def test_a_layer_without_per_feature_tensors_between_is_fine():
    model = nn.Sequential(nn.Linear(4, 6), nn.PReLU(), nn.Dropout(0.0),
                          nn.Linear(6, 2))
    ch.prune_linear_pair(model[0], model[3], [0, 2, 4])
    assert model(torch.randn(3, 4)).shape == (3, 2)


def test_a_list_of_parameters_beside_an_lr_variable_is_not_an_optimizer():
    model = three_layers()
    namespace = {"__name__": "notebook", "lr": 0.1,
                 "params": list(model.parameters())}     # a notebook's globals
    ch.prune_linear_pair(model[0], model[2], [0, 1, 2])
    assert model[0].out_features == 3
    assert namespace["params"][0] is not model[0].weight

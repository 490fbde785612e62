"""check_module_shapes over every torch.nn module class: each class of
torch.nn.modules is built with small sizes, then each of its parameters and
buffers is cut, one at a time, along each dimension, through `.data`; the
check must name that tensor and a setting of its module, and never raise.
Parametrized modules (weight_norm and spectral_norm, old hooks and
parametrizations, torch.nn.utils.parametrize) are read without running them."""
import copy
import inspect
import json
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations, parametrize

from tools.exports import load_exports

ch = load_exports("06_any_layer_any_node.ipynb")

# Small sizes for the classes that need arguments, or that have tensors only
# when asked (affine InstanceNorm, class weights, ...). A lazy module is built,
# then given one input (the test's `LAZY_INPUTS`) so that its tensors exist.
ARGS = {name: args for name, args in json.loads(
    (Path(__file__).parent / "data" / "module_args.json").read_text()).items() if name != "_"}
KWARGS = {
    "MultiheadAttention": [{}, {"kdim": 5, "vdim": 3, "add_bias_kv": True}],
    "LSTM": [{"bidirectional": True}, {"proj_size": 3}],
    "LinearCrossEntropyLoss": [{"bias": True, "weight": torch.ones(3)},
                               {"bias": True, "out_features": (2,)}],
    "Conv2d": [{}, {"groups": 2}],
    "ConvTranspose2d": [{}, {"groups": 2}],
}
# Classes without tensors that the small sizes (2,), (2, 2), (2, 2, 2) do not build.
NO_TENSORS = {"Unflatten": (1, (2, 2))}
LAZY_INPUTS = {1: torch.ones(2, 3, 5), 2: torch.ones(2, 3, 5, 5), 3: torch.ones(2, 3, 5, 5, 5)}

# Classes whose tensors no setting of theirs describes: a loss's class weights
# (the number of classes is not a setting of CrossEntropyLoss), and a list or
# dict of free parameters. They are built with tensors, cut, and checked for
# no exception only.
NO_SETTING = {
    "CrossEntropyLoss": {"weight": torch.ones(3)}, "NLLLoss": {"weight": torch.ones(3)},
    "NLLLoss2d": {"weight": torch.ones(3)}, "BCELoss": {"weight": torch.ones(3)},
    "BCEWithLogitsLoss": {"weight": torch.ones(3), "pos_weight": torch.ones(3)},
    "MultiMarginLoss": {"weight": torch.ones(3)},
    "MultiLabelSoftMarginLoss": {"weight": torch.ones(3)},
    "ParameterList": "params", "ParameterDict": "params",
}
# Abstract bases, built only through the classes above.
BASES = {"_ConvNd", "_ConvTransposeNd", "_ConvTransposeMixin", "_NormBase", "_BatchNorm",
         "_InstanceNorm", "_LazyNormBase", "RNNBase", "RNNCellBase", "_LazyConvXdMixin",
         "_WeightedLoss", "_Loss"}


def nn_classes():
    """Every nn.Module class defined in torch.nn.modules, by name."""
    found = {}
    for _, module in inspect.getmembers(nn.modules, inspect.ismodule):
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, nn.Module) and cls.__module__.startswith("torch.nn.modules"):
                found[name] = cls
    return found


def build(name, cls, kwargs=None):
    """The class at small sizes (None if it is a base or takes arguments the
    table does not give, and has no tensors)."""
    kwargs = kwargs or {}
    args = ARGS.get(name, ())
    if args in ("encoder", "decoder"):
        layer = (nn.TransformerEncoderLayer if args == "encoder" else nn.TransformerDecoderLayer)
        return cls(layer(8, 2, 16), 2, **kwargs)
    if name in NO_SETTING:
        extra = NO_SETTING[name]
        if extra == "params":
            made = cls()
            for key, value in {"a": nn.Parameter(torch.ones(3, 4))}.items():
                made.append(value) if name == "ParameterList" else made.update({key: value})
            return made
        return cls(**extra)
    module = cls(*args, **kwargs)
    if name.startswith("Lazy"):
        assert ch.check_module_shapes(module) == []      # no shapes yet: nothing to read
        dims = next(int(c) for c in name if c.isdigit()) if any(c.isdigit() for c in name) else 0
        module(LAZY_INPUTS[dims] if dims else torch.ones(2, 5))
    return module


def tensors(module):
    """(name, tensor) for every parameter and buffer with a dimension to cut."""
    return [(n, t) for n, t in [*module.named_parameters(), *module.named_buffers()]
            if t is not None and t.dim() > 0]


def cuts(module):
    """(tensor name, dim) for every dimension of size >= 2 of every tensor."""
    return [(n, d) for n, t in tensors(module) for d in range(t.dim()) if t.shape[d] >= 2]


def _own(module, name):
    if name in module._parameters:
        return module._parameters[name]
    return module._buffers[name]


def owner_and_leaf(module, dotted):
    *path, leaf = dotted.split(".")
    for part in path:
        module = module._modules[part]
    return module, leaf


def cut(module, dotted, dim):
    owner, leaf = owner_and_leaf(module, dotted)
    tensor = _own(owner, leaf)
    tensor.data = tensor.data.narrow(dim, 0, tensor.shape[dim] - 1)


def full_name(problem, root):
    return problem.tensor if problem.module == type(root).__name__ \
        else f"{problem.module}.{problem.tensor}"


def settings_named(problem, root):
    """The settings of the problem's module that its `setting` text names."""
    owner = root if problem.module == type(root).__name__ else root.get_submodule(problem.module)
    words = {w for w in problem.setting.replace("[", " ").replace("]", " ").replace(",", " ")
             .replace("*", " ").replace("/", " ").split()}
    words |= {w.split("[")[0] for w in words}
    return {w for w in words if isinstance(getattr(owner, w, None), (int, tuple, list))
            and not isinstance(getattr(owner, w, None), bool)}


def assert_named(module, dotted, dim):
    problems = ch.check_module_shapes(module)          # must not raise
    named = [p for p in problems if full_name(p, module) == dotted]
    assert named, f"cut {dotted} dim {dim}: no finding names it: {problems}"
    assert any(settings_named(p, module) for p in named), (
        f"cut {dotted} dim {dim}: no setting of the module is named: {named}")
    return named


CASES = [(name, kwargs) for name in sorted({*ARGS, *NO_SETTING}) if name in nn_classes()
         for kwargs in KWARGS.get(name, [{}])]


def test_every_class_is_built_or_listed_and_every_class_with_tensors_is_covered():
    """A new torch.nn class with tensors, or one that needs arguments, fails here
    until the table above covers it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        unbuilt, with_tensors = [], []
        for name, cls in sorted(nn_classes().items()):
            if name in BASES:
                continue
            try:
                module = build(name, cls) if name not in NO_TENSORS else cls(*NO_TENSORS[name])
            except Exception:
                try:                                   # no tensors for any small size?
                    module = next(m for m in (_try(cls, a) for a in [(2,), (2, 2), (2, 2, 2)])
                                  if m is not None)
                except StopIteration:
                    unbuilt.append(name)
                    continue
                if tensors(module):
                    unbuilt.append(name)
                continue
            if tensors(module):
                with_tensors.append(name)
                assert name in ARGS or name in NO_SETTING, f"{name}: add it to ARGS"
        assert unbuilt == [], f"add these to ARGS (or BASES): {unbuilt}"
    assert len(with_tensors) >= 40


def _try(cls, args):
    try:
        return cls(*args)
    except Exception:
        return None


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}{'-' + '-'.join(k) if k else ''}"
                                                     for n, k in CASES])
def test_each_cut_tensor_is_named_with_its_setting(name, kwargs):
    cls = nn_classes()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = build(name, cls, kwargs)
        problems = ch.check_module_shapes(module)
        assert tensors(module) and [p for p in problems if p.kind != "unchecked"] == [], name
        # what is not checked: only the links inside torch.nn's own composite modules
        assert all("own forward is not traced" in p.consistent_cut for p in problems), name
        assert bool(problems) == name.startswith("Transformer"), (name, problems)
        for dotted, dim in cuts(module):
            fresh = copy.deepcopy(module)
            cut(fresh, dotted, dim)
            if name in NO_SETTING:
                ch.check_module_shapes(fresh)   # nothing to compare with; no exception
            else:
                assert_named(fresh, dotted, dim)


def _reparametrized(kind, how):
    """A Linear, a Conv2d or a ConvTranspose2d (whose norm dim is 1),
    reparametrized in one of the ways of `HOW`."""
    make = {"Linear": lambda: nn.Linear(4, 6), "Conv2d": lambda: nn.Conv2d(3, 6, 3),
            "ConvTranspose2d": lambda: nn.ConvTranspose2d(6, 4, 3)}[kind]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return HOW[how](make())


HOW = {
    "weight_norm-hook": nn.utils.weight_norm,
    "weight_norm-hook-dim1": lambda m: nn.utils.weight_norm(m, dim=1),
    "weight_norm-hook-all": lambda m: nn.utils.weight_norm(m, dim=None),
    "spectral_norm-hook": nn.utils.spectral_norm,
    "weight_norm": parametrizations.weight_norm,
    "weight_norm-dim1": lambda m: parametrizations.weight_norm(m, dim=1),
    "spectral_norm": parametrizations.spectral_norm,
    "orthogonal": lambda m: parametrizations.orthogonal(m) if isinstance(m, nn.Linear)
    else parametrizations.orthogonal(m, orthogonal_map="householder"),
    "parametrize": lambda m: parametrize.register_parametrization(m, "weight", Doubled()),
}


class Doubled(nn.Module):
    """A parametrization that counts its calls."""
    calls = 0

    def forward(self, x):
        Doubled.calls += 1
        return x * 2


@pytest.mark.parametrize("kind", ["Linear", "Conv2d", "ConvTranspose2d"])
@pytest.mark.parametrize("how", list(HOW))
def test_parametrized_modules_are_read_without_running_them(kind, how):
    module = _reparametrized(kind, how)
    assert ch.check_module_shapes(module) == []
    for dotted, dim in cuts(module):
        fresh = _reparametrized(kind, how)     # (the hooks' modules cannot be deep-copied)
        buffers = {n: b.clone() for n, b in fresh.named_buffers()}
        calls = Doubled.calls
        cut(fresh, dotted, dim)
        assert_named(fresh, dotted, dim)
        assert Doubled.calls == calls, "a parametrization ran"
        for n, b in fresh.named_buffers():     # spectral_norm's u and v did not move
            assert n == dotted or torch.equal(b, buffers[n]), n

"""The doctor (chapter 6's `doctor` and its IPython extension, generated into
pruning_doctor.py): it reads the live objects an error left behind, names
what it saw and where, changes nothing, keeps nothing, and never raises."""
import gc
import subprocess
import sys
import textwrap
import weakref

import pytest
import torch
from torch import nn
from torch.nn.utils import prune

from tools.book import ROOT
from tools.exports import doctor_module, load_exports

ch = load_exports("06_any_layer_any_node.ipynb")

QUESTION = textwrap.dedent("""\
    import torch
    def test1():
      layer = torch.nn.Linear(100, 10)
      x = 5 - torch.sum(layer(torch.ones(100)))
      x.backward()
      layer.weight.data = layer.weight.data[:, :90]
      layer.weight.grad.data = layer.weight.grad.data[:, :90]
      x = 5 - torch.sum(layer(torch.ones(90)))
      x.backward()
    def test2():
      layer = torch.nn.Linear(100, 10)
      x = 5 - torch.sum(layer(torch.ones(100)))
      x.backward()
      del x
      layer.weight.data = layer.weight.data[:, :90]
      layer.weight.grad.data = layer.weight.grad.data[:, :90]
      x = 5 - torch.sum(layer(torch.ones(90)))
      x.backward()
    def test3():
      layer = torch.nn.Linear(100, 10)
      x = 5 - torch.sum(layer(torch.ones(100)))
      x.backward()
      layer.weight.data = layer.weight.data[:, :90]
      layer.weight.grad.data = layer.weight.grad.data[:, :90]
      layer.weight = torch.nn.Parameter(layer.weight)
      x = 5 - torch.sum(layer(torch.ones(90)))
      x.backward()
    """)

# A fresh IPython shell (what a Colab or Jupyter kernel runs), each argument a cell.
SHELL = textwrap.dedent("""\
    import sys
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance(colors="NoColor")
    for cell in sys.argv[1:]:
        print("=== cell", flush=True)
        shell.run_cell(cell)
        sys.stdout.flush()
    """)


def run_cells(*cells):
    """Each cell's printed output, from a fresh IPython shell in a new process
    that imports pruning_doctor from the repository, as `pip install` would."""
    done = subprocess.run([sys.executable, "-c", SHELL, "%xmode Minimal", *cells],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("=== cell\n")[2:]


def test_the_module_is_chapter_6s_export_cells():
    assert (ROOT / "pruning_doctor.py").read_text() == doctor_module()


def test_loaded_as_an_extension_it_reads_test1_and_says_nothing_of_test2_and_test3():
    load, define, one, two, three, unload, again = run_cells(
        "%load_ext pruning_doctor", QUESTION, "test1()", "test2()", "test3()",
        "%unload_ext pruning_doctor", "test1()")
    assert load == define == two == three == unload == ""
    assert one.startswith("RuntimeError: Function TBackward0 returned an invalid gradient")
    checkup = one.split("pruning doctor: ", 1)[1]
    assert "  seen: TBackward0's edge 0 ends in parameter 'layer.weight': recorded " \
           "[10, 100], [10, 90] now\n" in checkup
    assert "  cause: stale accumulator\n" in checkup
    assert "x (test1's frame)" in checkup and "1 model(s) (layer)" in checkup
    assert "pruning doctor" not in again and "invalid gradient" in again


def checkup_of(run, namespace):
    try:
        run()
    except (RuntimeError, IndexError, ValueError) as error:
        return ch.doctor(error, namespace)
    pytest.fail("it did not fail")


def test_a_custom_function_is_blamed_and_the_weight_cleared():
    class DropsColumns(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad[:, :-2] * 2

    net = nn.Linear(5, 4)

    checkup = checkup_of(lambda: DropsColumns.apply(net.weight).sum().backward(), {"net": net})
    assert checkup.cause == "custom autograd.Function"
    assert checkup.findings[0].endswith("parameter 'net.weight': recorded [4, 5], [4, 5] now")
    assert "output (the tensor backward() was called on)" in checkup.looked_at[0]


def test_a_stale_optimizer_state_is_named_when_the_step_fails():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    adam = torch.optim.Adam(model.parameters())
    model(torch.ones(3, 4)).sum().backward()
    adam.step()
    for tensor in (model[0].weight, model[0].bias):
        tensor.data = tensor.data[:6]
    model[2].weight.data = model[2].weight.data[:, :6]
    model[0].out_features = model[2].in_features = 6
    adam.zero_grad(set_to_none=True)
    model(torch.ones(3, 4)).sum().backward()
    checkup = checkup_of(adam.step, {"model": model, "adam": adam})
    assert checkup.cause == "optimizer state"
    assert checkup.raised_in.startswith("_single_tensor_adam (torch/optim/adam.py") or \
        "torch/optim/" in checkup.raised_in
    assert "adam's state 'exp_avg' for model.0.weight is [8, 4]; the parameter is [6, 4]" \
        in checkup.findings


def test_a_prune_reparametrization_cut_names_the_module_the_forward_failed_in():
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    prune.l1_unstructured(net[0], "weight", amount=0.5)
    net[0].weight_orig.data = net[0].weight_orig.data[:6]
    checkup = checkup_of(lambda: net(torch.ones(4)), {"net": net})
    assert checkup.cause == "forward error"
    assert checkup.raised_in.endswith(", in net.0 (Linear)")
    assert checkup.findings[0].startswith("in net.0 (Linear), whose forward raised, the tensors "
                                          "of size 8 or 6: bias is [8]; weight_orig is [6, 4]; "
                                          "weight_mask is [8, 4]")
    assert any(line.startswith("net.0.weight_orig: [6, 4], expected [8, 4]")
               for line in checkup.findings)
    assert any(line.startswith("net 0 -> 2: 0 gives 6 features and 2 reads 8")
               for line in checkup.findings)


def test_it_changes_nothing_and_keeps_nothing():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(4)).sum().backward()
    sgd.step()
    old = model(torch.ones(4)).sum()                       # a live graph
    model[0].weight.data = model[0].weight.data[:6]
    before = {n: (id(t), t.clone()) for n, t in model.state_dict(keep_vars=True).items()}
    state = {id(p): {k: v.clone() for k, v in s.items()} for p, s in sgd.state.items()}
    hooks = [len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules()]
    namespace = {"model": model, "sgd": sgd, "old": old}
    try:
        model(torch.ones(4)).sum().backward()
    except RuntimeError as error:
        checkup = ch.doctor(error, namespace)
    assert checkup.cause in ("forward error", "stale accumulator")
    after = model.state_dict(keep_vars=True)
    assert all(id(after[n]) == i and torch.equal(after[n], t) for n, (i, t) in before.items())
    assert all(torch.equal(v, state[id(p)][k]) for p, s in sgd.state.items()
               for k, v in s.items())
    assert hooks == [len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules()]
    assert list(namespace) == ["model", "sgd", "old"]
    held = weakref.ref(model)
    del model, sgd, old, namespace, before, after, state
    gc.collect()
    assert held() is None, "the checkup keeps a reference to the model"
    assert all(isinstance(field, (str, tuple)) for field in checkup)


def test_bad_input_is_refused_and_a_failing_object_does_not_raise():
    with pytest.raises(TypeError, match="error must be an exception"):
        ch.doctor("RuntimeError: ...")
    with pytest.raises(TypeError, match="namespace must be a dict"):
        ch.doctor(RuntimeError("x"), ["model"])

    class Broken(nn.Module):
        def named_modules(self, *args, **kwargs):
            raise RuntimeError("no listing")

        def modules(self):
            raise RuntimeError("no listing")

    checkup = ch.doctor(RuntimeError("mat1 and mat2 shapes cannot be multiplied (3x4 and 5x2)"),
                        {"broken": Broken()})
    assert isinstance(checkup, ch.Checkup) and "no listing" in str(checkup)


OLDER_GRAPH = ("the graph recorded model.0.weight as [32, 10]; it is [24, 10] now: the graph "
               "is older than the cut (or its forward used a copy made before it)")


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))


def _cut_hidden(model, keep=24):
    model[0].weight.data = model[0].weight.data[:keep]
    model[0].bias.data = model[0].bias.data[:keep]
    model[2].weight.data = model[2].weight.data[:, :keep]


def test_a_cut_between_forward_and_backward_is_read_from_the_graph_s_records():
    model = _mlp()
    model(torch.randn(4, 10)).sum().backward()
    loss = model(torch.randn(4, 10)).sum()
    _cut_hidden(model)                                   # after the forward, .grad cut too
    for param in (model[0].weight, model[0].bias, model[2].weight):
        param.grad = None
    model[0].weight.grad = torch.zeros_like(model[0].weight)
    checkup = checkup_of(loss.backward, {"model": model, "loss": loss})
    assert checkup.cause == "recorded before the cut"
    assert OLDER_GRAPH in checkup.findings


def test_a_grad_of_the_old_shape_in_the_optimizer_step_is_an_old_grad():
    model = _mlp()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(4, 10)).sum()
    _cut_hidden(model)
    loss.backward()                                      # .grad of the old widths
    checkup = checkup_of(sgd.step, {"model": model, "sgd": sgd, "loss": loss})
    assert checkup.cause == "old grad" and "torch/optim/" in checkup.raised_in
    assert OLDER_GRAPH in checkup.findings


def test_an_old_grad_is_the_cause_when_backward_adds_to_it():
    model = _mlp()
    model(torch.randn(4, 10)).sum().backward()          # .grad of the old widths
    _cut_hidden(model)
    model[0].out_features = model[2].in_features = 24
    checkup = checkup_of(lambda: model(torch.randn(4, 10)).sum().backward(), {"model": model})
    assert checkup.cause == "old grad"
    assert checkup.findings[0].startswith("model.0.weight.grad: [32, 10], expected [24, 10]")
    assert len(checkup.findings) == len(set(checkup.findings))


def test_a_dict_of_parameters_made_before_the_cut_is_named():
    model = _mlp()
    params = {k: v.detach() for k, v in model[0].named_parameters(prefix="0")}
    _cut_hidden(model)
    model[0].out_features = model[2].in_features = 24
    run = lambda: torch.func.functional_call(model, params, (torch.randn(4, 10),))
    checkup = checkup_of(run, {"model": model, "params": params})
    assert checkup.cause == "kept tensor"
    assert "functional_call was given '0.weight' of [32, 10]; the module's 0.weight is " \
           "[24, 10] now: a dict made before the cut" in checkup.findings


def test_a_view_names_the_setting_left_behind():
    class Heads(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads, self.head_dim, self.qkv = 8, 8, nn.Linear(64, 64)

        def forward(self, x):
            return self.qkv(x).view(x.shape[0], self.heads, self.head_dim)

    attention = Heads()
    attention.qkv = nn.Linear(64, 48)                    # 6 heads kept
    checkup = checkup_of(lambda: attention(torch.randn(2, 64)), {"attention": attention})
    assert checkup.cause == "forward error"
    assert "Heads.heads = 8 is in the view's shape [2, 8, 8]: with the 96 elements the input " \
           "has, that size would be 6, if the other sizes are right" in checkup.findings


def test_a_tensor_of_this_step_is_not_called_a_cache_but_one_from_before_the_cut_is():
    encoder = nn.Linear(4, 6)
    memory = encoder(torch.randn(3, 4))                  # before the cut: a cache
    encoder.weight.data = encoder.weight.data[:, :3]
    query = encoder(torch.randn(2, 3))                   # after the cut: this step's
    scores = query @ memory.T
    checkup = checkup_of(scores.sum().backward, {"encoder": encoder, "memory": memory,
                                                 "query": query, "scores": scores})
    cached = [line for line in checkup.findings if "a cache computed before pruning" in line]
    assert len(cached) == 1 and "of shape [3, 6], made by AddmmBackward0" in cached[0]
    assert not any("of shape [2, 6]" in line for line in checkup.findings)   # query


def test_a_hook_holding_a_mask_of_the_old_shape_is_named():
    model = _mlp()
    masks = {"0.weight": (model[0].weight.detach().abs() > 0.1).float()}
    model[0].weight.register_hook(lambda grad, mask=masks["0.weight"]: grad * mask)
    _cut_hidden(model)
    model[0].out_features = model[2].in_features = 24
    checkup = checkup_of(lambda: model(torch.randn(4, 10)).sum().backward(), {"model": model})
    assert checkup.cause == "hook"
    assert checkup.findings[0] == ("model.0.weight has a hook (<lambda>) that holds a tensor "
                                   "of [32, 10]; model.0.weight is [24, 10] now")


def test_an_average_copy_made_before_the_cut_is_compared_with_its_model():
    model = _mlp()
    average = torch.optim.swa_utils.AveragedModel(model)
    _cut_hidden(model)
    model[0].out_features = model[2].in_features = 24
    checkup = checkup_of(lambda: average.update_parameters(model),
                         {"model": model, "average": average})
    assert checkup.cause == "average copy"
    assert "average.module.0.weight is [32, 10]; model.0.weight is [24, 10]: the average " \
           "copy was made before the cut" in checkup.findings


def test_a_broadcast_in_a_forward_names_the_tensors_of_both_sizes_as_a_lead_not_a_verdict():
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.decoder = nn.Linear(8, 10, bias=False)
            self.bias = nn.Parameter(torch.zeros(10))

        def forward(self, x):
            return self.decoder(x) + self.bias

    head = Head()
    head.decoder = nn.Linear(8, 12, bias=False)          # two classes added, bias left
    checkup = checkup_of(lambda: head(torch.randn(3, 8)), {"head": head})
    # two tensors of the two sizes do not say that one was left uncut: they may
    # never have been meant to meet (tensors paired by position, a residual)
    assert checkup.cause == "cannot tell" and "a module's tensors" in checkup.fix
    assert checkup.findings[0] == (
        "in head (Head), whose forward raised, the tensors of size 12 or 10: bias is [10]; "
        "decoder.weight is [12, 8]: if the operation combined two of these, one was cut or "
        "resized without the other, or they were never meant to meet")


def test_where_it_was_raised_is_the_traceback_s_innermost_line_in_torch_or_not():
    import traceback
    layer = nn.Linear(100, 10)
    x = 5 - layer(torch.ones(100)).sum()
    x.backward()
    layer.weight.data = layer.weight.data[:, :90]
    x = 5 - layer(torch.ones(90)).sum()
    checkup = checkup_of(x.backward, {"layer": layer, "x": x})
    error = pytest.raises(RuntimeError, x.backward).value
    last = traceback.extract_tb(error.__traceback__)[-1]
    assert checkup.raised_in == f"{last.name} (torch/autograd/graph.py, line {last.lineno})"

    @torch.no_grad()
    def keep_columns(weight, keep):                    # a decorator of torch's around it
        return weight[:, keep]
    checkup = checkup_of(lambda: keep_columns(torch.ones(4, 3), torch.tensor([5])), {})
    assert checkup.raised_in.startswith("keep_columns (test_doctor.py, line ")


def test_under_prune_a_copy_or_an_optimizer_of_the_computed_weight_is_named():
    import copy
    net = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 2))
    prune.l1_unstructured(net[0], "weight", amount=0.4)
    for run in (lambda: copy.deepcopy(net), lambda: torch.optim.SGD([net[0].weight], lr=0.1)):
        checkup = checkup_of(run, {"net": net})
        assert not any("examination stopped" in line for line in checkup.not_seen)
        assert checkup.cause == "prune reparametrization"
        assert checkup.findings[0].startswith("net.0.weight is computed by torch.nn.utils.prune")


def test_after_a_second_backward_a_graph_a_module_keeps_is_named_or_the_freed_nodes_told():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 3)
            self.scaled = self.linear.weight * 2           # computed once: a graph kept

        def forward(self, x):
            return x @ self.scaled.t()
    scaled = Scaled()
    scaled(torch.ones(2, 4)).sum().backward()
    loss = scaled(torch.ones(2, 4)).sum()
    checkup = checkup_of(loss.backward, {"scaled": scaled, "loss": loss})
    assert checkup.cause == "kept tensor"
    assert checkup.findings[0].startswith("scaled.scaled is a tensor with a graph (MulBackward0) "
                                          "that its module keeps from step to step")

    rnn = nn.GRU(5, 7, batch_first=True)
    state = torch.zeros(1, 2, 7)
    for step in range(2):
        out, state = rnn(torch.randn(2, 4, 5), state)        # not detached
        if step == 0:
            out.sum().backward()
    checkup = checkup_of(out.sum().backward, {"rnn": rnn, "state": state})
    assert checkup.cause == "cannot tell" and "a tensor made in an earlier step" in checkup.fix
    assert checkup.findings[0].startswith("this backward reached ")
    assert "a hidden state not detached between batches" in checkup.findings[0]


def test_an_ema_that_pairs_by_position_is_named_when_prune_reorders_the_parameters():
    class Ema(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.module = copy.deepcopy(model)

        @torch.no_grad()
        def update(self, model, decay=0.9):
            for mine, theirs in zip(self.module.parameters(), model.parameters()):
                mine.mul_(decay).add_(theirs, alpha=1 - decay)
    import copy
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Conv2d(4, 2, 3))
    ema = Ema(model)
    prune.l1_unstructured(model[0], "weight", amount=0.3)      # no shape changes
    checkup = checkup_of(lambda: ema.update(model), {"model": model, "ema": ema})
    assert checkup.cause == "average copy" and checkup.raised_in.startswith("update (")
    assert any(line.startswith("ema.module and model list other parameters, or in another "
                               "order (model has 0.weight_orig where the copy has 0.weight)")
               for line in checkup.findings)


def test_frozen_parameters_and_mixed_dtypes_are_listed_when_the_message_is_about_them():
    net = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    net[0].requires_grad_(False)
    checkup = checkup_of(lambda: net[0].weight.register_hook(lambda g: g), {"net": net})
    assert "2 parameter(s) of net do not require grad: 0.weight, 0.bias" in checkup.findings
    net[1].weight.data = net[1].weight.data.double()
    checkup = checkup_of(lambda: net(torch.ones(3)), {"net": net})
    assert checkup.findings[0] == ("net.1 (Linear) mixes dtypes or devices: input is float32 "
                                   "on cpu; weight is float64 on cpu; bias is float32 on cpu")


def test_every_section_the_doctor_sends_to_is_a_title_or_heading_of_that_chapter():
    import re

    import nbformat
    from tools.book import BOOK
    for cause, where in ch.READ.items():
        for part in where.split("; "):
            number, title = re.fullmatch(r"chapter (\d), ([^(:]+?)(?::.*| \(.*\))?", part).groups()
            [path] = BOOK.glob(f"0{number}_*.ipynb")
            headings = [line.lstrip("#").strip() for cell in nbformat.read(path, 4).cells
                        if cell.cell_type == "markdown" for line in cell.source.splitlines()
                        if line.startswith("#")]
            assert any(h.startswith(title) for h in headings), (cause, part)
    assert set(ch.READ) <= set(ch.FIXES) | set(ch.CAUSES) | set(ch.DOCTOR_FIXES)   # its causes


def test_a_failed_load_compares_the_checkpoint_with_the_model_it_was_loading_into():
    net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    wrapped = {f"module.{k}": v for k, v in net.state_dict().items()}   # saved wrapped
    checkup = checkup_of(lambda: net.load_state_dict(wrapped), {"net": net})
    assert checkup.cause == "state dict" and "a wrapper's 'module.' level" in checkup.fix
    assert checkup.findings[0].startswith("the checkpoint has module.0.weight, module.0.bias")
    pruned = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    prune.l1_unstructured(pruned[0], "weight", amount=0.5)
    checkup = checkup_of(lambda: net.load_state_dict(pruned.state_dict()), {"net": net})
    assert "saved under torch.nn.utils.prune" in checkup.fix
    small = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
    checkup = checkup_of(lambda: net.load_state_dict(small.state_dict()), {"net": net})
    assert "smaller: a pruned checkpoint into a model of the old widths" in checkup.fix
    assert "3 tensor(s) of other shapes: 0.weight is [5, 4] in the checkpoint, [6, 4] in " \
           "Sequential" in checkup.findings[0]


def test_models_with_the_same_modules_but_other_shapes_are_compared():
    members = [nn.Sequential(nn.Linear(3, width), nn.Linear(width, 1)) for width in (5, 4)]
    checkup = checkup_of(lambda: torch.stack([members[0][0].weight, members[1][0].weight]),
                         {"members": members})
    assert checkup.cause == "cannot tell"
    assert "members[0] and members[1] have the same modules, but not the same shapes: 0.weight " \
           "is [5, 3] and [4, 3]" in " ".join(checkup.findings)


def test_values_that_are_not_finite_are_listed_when_the_message_is_about_them():
    net = nn.Sequential(nn.Linear(3, 2))
    with torch.no_grad():
        net[0].weight[1] = float("nan")
    net(torch.ones(3)).sum().backward()
    net[0].weight.grad[0, 0] = float("inf")
    checkup = checkup_of(lambda: nn.utils.clip_grad_norm_(net.parameters(), 1.0,
                                                         error_if_nonfinite=True), {"net": net})
    assert list(checkup.findings[:2]) == ["net.0.weight holds NaN or inf",
                                          "net.0.weight.grad holds NaN or inf"]


def test_in_a_fresh_process_it_needs_no_torch_module_imported_before_it():
    """What the doctor reads through (prune's hooks, torch.fx) it imports
    itself: the reader's notebook may never have imported them."""
    code = textwrap.dedent("""\
        import torch
        import pruning_doctor
        net = torch.nn.Linear(3, 2)
        checkup = pruning_doctor.doctor(ValueError("can't optimize a non-leaf Tensor"),
                                        {"net": net})
        assert not any("examination stopped" in line for line in checkup.not_seen), checkup
        print(checkup.cause)
        """)
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "unknown"

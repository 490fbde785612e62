"""The helpers of chapter 6 (06_any_layer_any_node.ipynb), as one module: `doctor`,
`diagnose_invalid_gradient`, `read_message`, `check_module_shapes`, ...

In a notebook: `%load_ext pruning_doctor`; in a script:
`print(pruning_doctor.doctor(error, globals()))`.

Generated from the chapter's cells tagged `export` by tools/exports.py
(`make generate`): edit the chapter, not this file."""


# --- 06_any_layer_any_node.ipynb, cell 7 ---
# @title MESSAGE_RULES: how a pasted error is read (the triage page reads the same table)
# ONE table (this cell: the backward's checks; the next: the forward's, the
# optimizer's, loading's), read by `read_message` (folded below) and by the
# triage page's script (book/_static/triage_rules.js is generated from them).
# Each rule: the kind of message, a regular expression (in the syntax Python
# and JavaScript share), what each group is (and which are shapes, which
# integers), and what it points to: one cause (a key of CAUSES) when the text
# decides, or a list of causes in order when it cannot ("cannot tell").
# "where" maps where the traceback says the error was raised to a decision
# ("none": no frame of a traceback was pasted). A list of causes is never
# the whole story: read_message adds "other" (a cause these rules do not name).
# The "invalid gradient" checks are the engine's own (validate_outputs in
# torch/csrc/autograd/engine.cpp, and InputMetadata for the shape).
_NODE = r"((?:(?!Function )[^\n])+?)"        # any name: namespaces, spaces, <...>
_WORD = r"([^ \t\n\r\f\v]+)"                # as Python and JavaScript both read it
_SHAPE = r"\[([^\]]*)\]"
SPACE = r"[ \t\n\r\f\v\u00a0]+"                 # runs of it read as one space
WRAP = r"(?<=[A-Za-z0-9_])\r?\n(?=[A-Za-z0-9_])"  # a line break inside a word or number
DASH = "[\u2010-\u2015\u2212]"                  # dashes a page or an editor puts for "-"
_FORWARD = ["module", "kept tensor", "input"]
MESSAGE_RULES = [
    {"kind": "shape", "autograd": True, "cause": "built-in",
     "pattern": "Function " + _NODE + r" returned an invalid gradient at index (\d+)"
                r" - got " + _SHAPE + " but expected shape compatible with " + _SHAPE,
     "groups": ["node", "index", "got", "expected"],
     "shapes": ["got", "expected"], "ints": ["index"]},
    {"kind": "shape", "autograd": True, "cause": "built-in",     # torch < 1.0's wording
     "pattern": "Function " + _NODE + r" returned an invalid gradient at index (\d+)"
                r" - expected shape " + _SHAPE + " but got " + _SHAPE,
     "groups": ["node", "index", "expected", "got"],
     "shapes": ["got", "expected"], "ints": ["index"]},
    {"kind": "dtype", "autograd": True, "cause": "dtype",
     "pattern": "Function " + _NODE + r" returned an invalid gradient at index (\d+)"
                r" - expected dtype " + _WORD + r" but got " + _WORD,
     "groups": ["node", "index", "expected", "got"], "shapes": [], "ints": ["index"]},
    {"kind": "layout", "autograd": True, "cause": "layout",
     "pattern": "Function " + _NODE + r" returned an invalid gradient at index (\d+)"
                r" - expected layout " + _WORD + r" but got " + _WORD,
     "groups": ["node", "index", "expected", "got"], "shapes": [], "ints": ["index"]},
    {"kind": "device", "autograd": True, "cause": "device",
     "pattern": "Function " + _NODE + r" returned an invalid gradient at index (\d+)"
                r" - expected device " + _WORD + r" but got " + _WORD,
     "groups": ["node", "index", "expected", "got"], "shapes": [], "ints": ["index"]},
    {"kind": "count", "autograd": True, "cause": "count",
     "pattern": "Function " + _NODE + r" returned an invalid number of gradients"
                r" - expected (\d+), but got (\d+)",
     "groups": ["node", "expected", "got"], "shapes": [], "ints": ["expected", "got"]},
    {"kind": "count", "autograd": True, "cause": "count",
     "pattern": "function " + _NODE + r" returned an incorrect number of gradients"
                r" \(expected (\d+), got (\d+)\)",
     "groups": ["node", "expected", "got"], "shapes": [], "ints": ["expected", "got"]},
    {"kind": "type", "autograd": True, "cause": "type",  # older releases: dtype and device in one
     "pattern": "Function " + _NODE + r" returned an invalid gradient at index (\d+)"
                r" - expected type (TensorOptions\((?:[^()]|\([^()]*\))*\)|[^ \t\n\r\f\v]+)"
                r" but got (TensorOptions\((?:[^()]|\([^()]*\))*\)|[^ \t\n\r\f\v]+)",
     "groups": ["node", "index", "expected", "got"], "shapes": [], "ints": ["index"]},
    {"kind": "gradient argument", "autograd": True, "cause": "gradient argument",
     "pattern": r"invalid gradient at index (\d+) - expected shape " + _SHAPE
                + " but got " + _SHAPE,               # torch < 1.0: no "Function X returned"
     "groups": ["index", "expected", "got"], "shapes": ["expected", "got"], "ints": ["index"]},
    {"kind": "gradient argument", "autograd": False, "cause": "gradient argument",
     "where": {"none": ["gradient argument", "checkpoint recompute"]},
     "pattern": r"(?:Mismatch in shape|mismatch was detected): grad_output\[(\d+)\] has a"
                r" shape of torch\.Size\(" + _SHAPE + r"\) and output\[\d+\] has a shape of"
                r" torch\.Size\(" + _SHAPE + r"\)",
     "groups": ["index", "got", "expected"], "shapes": ["got", "expected"], "ints": ["index"]},
    {"kind": "complex", "autograd": True, "cause": "complex",
     "pattern": r"Expected isFloatingType\(grad\.scalar_type\(\)\) \|\|"
                r" \(input_is_complex == grad_is_complex\) to be true",
     "groups": [], "shapes": [], "ints": []},
    {"kind": "hook", "autograd": True, "cause": "hook",
     "pattern": r"hook ['`]([^'`]*)['`] has changed the (size|type|device) of value",
     "groups": ["hook", "changed"], "shapes": [], "ints": []},
    {"kind": "hook", "autograd": True, "cause": "hook",
     "pattern": r"hook ['`]([^'`]*)['`] has returned an incorrect number of values"
                r" \(got (\d+), but expected (\d+)\)",
     "groups": ["hook", "got", "expected"], "shapes": [], "ints": ["got", "expected"]},
    {"kind": "in-place", "autograd": False, "cause": "in-place",
     "pattern": r"one of the variables needed for gradient computation has been"
                r" modified by an inplace operation: \[" + _WORD + r" " + _SHAPE + r"\]",
     "groups": ["tensor", "got"], "shapes": ["got"], "ints": []},
]


# --- 06_any_layer_any_node.ipynb, cell 8 ---
# @title MESSAGE_RULES, continued: errors of a forward pass, an optimizer, a checkpoint
MESSAGE_RULES += [
    {"kind": "matmul", "autograd": False, "cause": _FORWARD,
     "pattern": r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)",
     "groups": ["rows_a", "got", "expected", "cols_b"],
     "shapes": [], "ints": ["rows_a", "got", "expected", "cols_b"]},
    {"kind": "matmul", "autograd": False, "cause": _FORWARD,     # torch < 1.7's wording
     "pattern": r"size mismatch, m1: \[(\d+) x (\d+)\], m2: \[(\d+) x (\d+)\]",
     "groups": ["rows_a", "got", "expected", "cols_b"],
     "shapes": [], "ints": ["rows_a", "got", "expected", "cols_b"]},
    {"kind": "matmul", "autograd": False, "cause": _FORWARD,     # torch 1.x's addmm wording
     "pattern": r"mat1 dim 1 must match mat2 dim 0",
     "groups": [], "shapes": [], "ints": []},
    {"kind": "empty layer", "autograd": False, "cause": "empty layer",
     "pattern": r"Given groups=1, expected weight to be at least 1 at dimension 0, but got"
                r" weight of size " + _SHAPE,
     "groups": ["weight"], "shapes": ["weight"], "ints": []},
    {"kind": "groups", "autograd": False, "cause": "groups",
     "pattern": r"Given groups=(\d+), expected weight to be (?:at least|divisible by) (\d+) at"
                r" dimension 0, but got weight of size \[?" + _SHAPE + r"\]?",
     "groups": ["groups", "expected", "weight"], "shapes": ["weight"],
     "ints": ["groups", "expected"]},
    {"kind": "channels", "autograd": False, "cause": ["groups", *_FORWARD],
     "pattern": r"Given groups=([2-9]|\d\d+), weight of size \[?([\d, ]*\d)\]?, expected"
                r" input\[?([\d, ]*\d)\]? to have (\d+) channels, but got (\d+) channels",
     "groups": ["groups", "weight", "input", "expected", "got"],
     "shapes": ["weight", "input"], "ints": ["groups", "expected", "got"]},
    {"kind": "channels", "autograd": False, "cause": _FORWARD,
     "pattern": r"weight of size \[?([\d, ]*\d)\]?, expected input\[?([\d, ]*\d)\]? to"
                r" have (\d+) channels, but got (\d+) channels",
     "groups": ["weight", "input", "expected", "got"],
     "shapes": ["weight", "input"], "ints": ["expected", "got"]},
    {"kind": "running stats", "autograd": False, "cause": ["running stats", "input"],
     "pattern": r"running_(?:mean|var) should contain (\d+) elements not (\d+)",
     "groups": ["got", "expected"], "shapes": [], "ints": ["got", "expected"]},
    {"kind": "layer norm", "autograd": False, "cause": "layer norm",
     "pattern": r"Expected (weight|bias) to be of same shape as normalized_shape, but got"
                r" \w+ of shape " + _SHAPE + " and normalized_shape = " + _SHAPE,
     "groups": ["tensor", "got", "expected"], "shapes": ["got", "expected"], "ints": []},
    {"kind": "layer norm", "autograd": False, "cause": ["layer norm", "input"],
     "pattern": r"Given normalized_shape=" + _SHAPE + r", expected input with shape"
                r" \[\*,? ?([^\]]*)\], but got input of size ?" + _SHAPE,
     "groups": ["expected", "last", "input"], "shapes": ["expected", "input"], "ints": []},
    {"kind": "bilinear", "autograd": False, "cause": ["bilinear", "input"],
     "pattern": r"bilinear\(\): (input[12]) size does not match weight size: got (\d+)"
                r" but expected (\d+)",
     "groups": ["tensor", "got", "expected"], "shapes": [], "ints": ["got", "expected"]},
    {"kind": "index", "autograd": False, "cause": ["index", "input", "module"],
     "pattern": r"index (-?\d+) is out of bounds for dimension (\d+) with size (\d+)",
     "groups": ["index", "dim", "size"], "shapes": [], "ints": ["index", "dim", "size"]},
    {"kind": "index", "autograd": False, "cause": ["index", "input", "module"],
     "pattern": r"index out of range in self",
     "groups": [], "shapes": [], "ints": []},
    {"kind": "devices", "autograd": False, "cause": "devices",
     "pattern": r"Expected all tensors to be on the same device|Expected object of backend"
                r" \w+ but got backend \w+|Input type \([\w.]+\) and weight type \([\w.]+\)"
                r" should be the same",
     "groups": [], "shapes": [], "ints": []},
    {"kind": "broadcast", "autograd": False,
     "cause": ["optimizer state", "old grad", "module", "kept tensor", "hook",
               "recorded before the cut", "input", "average copy", "custom Function"],
     "where": {"optimizer": ["optimizer state", "old grad"], "average": "average copy",
               "hook": ["hook", "kept tensor"],
               "backward": ["old grad", "recorded before the cut", "hook", "kept tensor",
                            "custom Function"],
               "forward": _FORWARD},
     "pattern": r"The (?:expanded )?size of (?:the )?tensor(?: a)? \((\d+)\) must match the"
                r" (?:existing )?size(?: of tensor b)? \((\d+)\) at non-singleton dimension (\d+)",
     "groups": ["got", "expected", "dim"], "shapes": [], "ints": ["got", "expected", "dim"]},
    {"kind": "view", "autograd": False, "cause": _FORWARD,
     "pattern": r"shape '\[([^\]]*)\]' is invalid for input of size (\d+)",
     "groups": ["shape", "size"], "shapes": ["shape"], "ints": ["size"]},
    {"kind": "checkpoint", "autograd": False, "cause": "checkpoint recompute",
     "pattern": r"Recomputed values for the following tensors have different metadata"
                r" than during the forward pass",
     "groups": [], "shapes": [], "ints": []},
    {"kind": "state dict", "autograd": False, "cause": "state dict",
     "pattern": r"size mismatch for ([^: \t\n\r\f\v]+): copying a param with shape"
                r" torch\.Size\(" + _SHAPE + r"\) from checkpoint, the shape in current"
                r" model is torch\.Size\(" + _SHAPE + r"\)",
     "groups": ["tensor", "got", "expected"], "shapes": ["got", "expected"], "ints": []},
    {"kind": "state dict keys", "autograd": False, "cause": "state dict",
     "pattern": r"(Missing|Unexpected) key\(s\) in state_dict: ([^\n]*)",
     "groups": ["keys", "names"], "shapes": [], "ints": []},
    {"kind": "optimizer state", "autograd": False, "cause": ["optimizer state", "state dict"],
     "pattern": r"loaded state dict contains a parameter group that doesn't match the size"
                r" of optimizer's group",
     "groups": [], "shapes": [], "ints": []},
]


# --- 06_any_layer_any_node.ipynb, cell 9 ---
# @title MESSAGE_RULES, more: layers' own checks, recurrent layers, indexing, losses
MESSAGE_RULES += [
    {"kind": "bias", "autograd": False, "cause": ["module", "kept tensor"],
     "pattern": r"Given weight of size " + _SHAPE + r", expected bias to be 1-dimensional"
                r" with (\d+) elements, but got bias of size " + _SHAPE,
     "groups": ["weight", "expected", "got"], "shapes": ["weight", "got"], "ints": ["expected"]},
    {"kind": "cat", "autograd": False, "cause": _FORWARD,
     "pattern": r"Sizes of tensors must match except in dimension (\d+)\. Expected size (\d+)"
                r" but got size (\d+) for tensor number (\d+) in the list",
     "groups": ["dim", "expected", "got", "tensor"], "shapes": [],
     "ints": ["dim", "expected", "got", "tensor"]},
    {"kind": "stack", "autograd": False, "cause": ["kept tensor", "module", "input"],
     "pattern": r"stack expects each tensor to be equal size, but got " + _SHAPE
                + r" at entry (\d+) and " + _SHAPE + r" at entry (\d+)",
     "groups": ["expected", "first", "got", "second"], "shapes": ["expected", "got"],
     "ints": ["first", "second"]},
    {"kind": "hidden state", "autograd": False, "cause": ["kept tensor", "module", "input"],
     "pattern": r"Expected hidden(?:\[\d\])? size \(([^)]*)\), got \[([^\]]*)\]",
     "groups": ["expected", "got"], "shapes": ["expected", "got"], "ints": []},
    {"kind": "recurrent input", "autograd": False, "cause": _FORWARD,
     "pattern": r"input\.size\(-1\) must be equal to input_size\. Expected (\d+), got (\d+)",
     "groups": ["expected", "got"], "shapes": [], "ints": ["expected", "got"]},
    {"kind": "matmul", "autograd": False, "cause": _FORWARD,
     "pattern": r"Expected size for first two dimensions of batch2 tensor to be: " + _SHAPE
                + r" but got: " + _SHAPE,
     "groups": ["expected", "got"], "shapes": ["expected", "got"], "ints": []},
    {"kind": "attention", "autograd": False, "cause": _FORWARD,
     "pattern": r"was expecting embedding dimension of (\d+), but got (\d+)",
     "groups": ["expected", "got"], "shapes": [], "ints": ["expected", "got"]},
    {"kind": "unflatten", "autograd": False, "cause": _FORWARD,
     "pattern": r"unflatten: Provided sizes " + _SHAPE + r" don't multiply up to the size of"
                r" dim (\d+) \((\d+)\)",
     "groups": ["sizes", "dim", "size"], "shapes": ["sizes"], "ints": ["dim", "size"]},
    {"kind": "mask", "autograd": False, "cause": ["index", "kept tensor", "input"],
     "pattern": r"The shape of the mask " + _SHAPE + r" at index (\d+) does not match the"
                r" shape of the indexed tensor " + _SHAPE + r" at index (\d+)",
     "groups": ["got", "index", "expected", "at"], "shapes": ["got", "expected"],
     "ints": ["index", "at"]},
    {"kind": "index", "autograd": False, "cause": ["index", "mask", "kept tensor", "module"],
     "pattern": r"shape mismatch: value tensor of shape " + _SHAPE + r" cannot be broadcast"
                r" to indexing result of shape " + _SHAPE,
     "groups": ["got", "expected"], "shapes": ["got", "expected"], "ints": []},
    {"kind": "loss", "autograd": False, "cause": ["module", "input", "kept tensor"],
     "pattern": r"Expected input batch_size \((\d+)\) to match target batch_size \((\d+)\)",
     "groups": ["got", "expected"], "shapes": [], "ints": ["got", "expected"]},
    {"kind": "loss", "autograd": False, "cause": ["module", "input"],
     "pattern": r"Using a target size \(torch\.Size\(" + _SHAPE + r"\)\) that is different to"
                r" the input size \(torch\.Size\(" + _SHAPE + r"\)\)",
     "groups": ["expected", "got"], "shapes": ["expected", "got"], "ints": []},
    {"kind": "loss", "autograd": False, "cause": ["module", "index", "input"],
     "pattern": r"Target (-?\d+) is out of bounds",
     "groups": ["index"], "shapes": [], "ints": ["index"]},
    {"kind": "input dims", "autograd": False, "cause": ["input", "module", "kept tensor"],
     "pattern": r"Expected (\d+)D \(unbatched\) or (\d+)D \(batched\) input to (\w+), but got"
                r" input of size: " + _SHAPE,
     "groups": ["unbatched", "batched", "operation", "input"], "shapes": ["input"],
     "ints": ["unbatched", "batched"]},
    {"kind": "dims", "autograd": False,
     "cause": ["input", "module", "kept tensor", "batching rule"],
     "pattern": r"Dimension out of range \(expected to be in range of \[(-?\d+), (-?\d+)\],"
                r" but got (-?\d+)\)",
     "groups": ["low", "high", "got"], "shapes": [], "ints": ["low", "high", "got"]},
    {"kind": "index", "autograd": False, "cause": ["index", "input", "module"],
     "pattern": r"Expected idx >= 0 && idx < num_embeddings but found idx to be (-?\d+)",
     "groups": ["index"], "shapes": [], "ints": ["index"]},
    {"kind": "group norm", "autograd": False, "cause": ["module", "input"],
     "pattern": r"Expected number of channels in input to be divisible by num_groups, but got"
                r" input of shape " + _SHAPE + r" and num_groups=(\d+)",
     "groups": ["input", "groups"], "shapes": ["input"], "ints": ["groups"]},
    {"kind": "second backward", "autograd": False, "cause": ["kept tensor"],
     "pattern": r"Trying to backward through the graph a second time",
     "groups": [], "shapes": [], "ints": []},
]


# --- 06_any_layer_any_node.ipynb, cell 10 ---
# @title NODE_RULES, HINT_RULES, WHERE_RULES: what a node's name, the rest of the text and the traceback tell
# What a shape message's node says (first match wins). "built-in" is any node
# of torch's own (derivatives.yaml, in any era's spelling: TBackward0, and
# MmBackward before torch 1.10): the text cannot tell why it failed.
_BUILT_IN = ["stale accumulator", "kept tensor", "batching rule"]
NODE_RULES = [
    {"pattern": r"^Index(Put)?Backward\d+$|^Masked\w*Backward\d+$",
     "cause": ["mask", "stale accumulator", "kept tensor"]},
    {"pattern": r"^Index(Put)?Backward$|^Masked\w*Backward$",  # torch < 1.10, or a Function's
     "cause": ["custom Function", "mask", "stale accumulator"]},
    {"pattern": r"DifferentiableGraphBackward", "cause": "torchscript"},
    {"pattern": r"^CompiledFunction(Backward)?$", "cause": ["stale accumulator", "compiled"]},
    {"pattern": r"^(Broadcast|ReduceAddCoalesced|Gather|Scatter|CheckpointFunction"
                r"|SyncBatchNorm)Backward$|^torch::autograd::", "cause": _BUILT_IN},
    {"pattern": r"^[A-Z]\w*Backward\d+$|^[A-Za-z]\w*backward\d+$", "cause": _BUILT_IN},
    {"pattern": r"^[A-Z]\w*Backward$",                # torch < 1.10, or a Function's
     "cause": ["stale accumulator", "custom Function", "kept tensor"]},
    {"pattern": r"^[a-z_]\w*Backward$",              # a Function's: its code, or its input's
     "cause": ["custom Function", "stale accumulator", "kept tensor"]},
    {"pattern": r"^[a-z]\w*backward$",               # lowercased by hand
     "cause": ["stale accumulator", "custom Function", "kept tensor"]},
    {"pattern": r"::", "cause": ["custom C++", "stale accumulator"]},
    {"pattern": r"", "cause": ["custom Function", "stale accumulator", "kept tensor"]},
]

# What the rest of the text can tell (first match wins), for the kinds named
# (and, with "node", only for a node whose name that pattern finds: a batching
# rule is torch's, whose nodes end in a number).
HINT_RULES = [
    {"kinds": ["shape"], "node": r"\d$", "pattern": r"\bvmap\b|functorch|torch\.func\b|\bjacrev\b|\bjacfwd\b"
     r"|\bhessian\(|is_grads_batched", "cause": ["batching rule", "stale accumulator"]},
    {"kinds": ["matmul", "channels", "broadcast", "view"],
     "pattern": r"\bfunctional_call\b|[/\\]nn[/\\]utils[/\\]stateless\.py",
     "cause": ["kept tensor", "module", "input"]},
    {"kinds": ["gradient argument"], "pattern": r"[/\\]utils[/\\]checkpoint\.py"
     r"|CheckpointFunction", "cause": "checkpoint recompute"},
    {"kinds": ["shape"], "pattern": r"compatible with \[0\]|expected shape \[0\]|got \[0\] but",
     "cause": ["sharded placeholder", "custom Function", "stale accumulator"]},
    {"kinds": ["index"], "pattern": r"with size 0\b", "cause": ["empty layer", "index"]},
]

# Where a traceback says the error was raised: the innermost frame (the last
# match in the text before the message) that one of these names.
WHERE_RULES = [
    {"where": "load", "pattern": r"\bin load_state_dict\b|\.load_state_dict\("},
    {"where": "optimizer", "pattern": r"[/\\]optim[/\\](?!swa_utils)\w+\.py|optimi[sz]er\.step\("
                                      r"|_single_tensor_\w+|_multi_tensor_\w+"},
    {"where": "average", "pattern": r"swa_utils|update_parameters|\bema\b|ModelEma"
                                    r"|update_ema"},
    {"where": "hook", "pattern": r"register_hook|_call_hooks|in hook\b"},
    {"where": "backward", "pattern": r"\.backward\(|_engine_run_backward|run_backward"
                                     r"|autograd[/\\]__init__\.py|_tensor\.py\W+line \d+, in backward"},
    {"where": "forward", "pattern": r"[/\\]nn[/\\]modules[/\\]|[/\\]nn[/\\]functional\.py"
                                    r"|_call_impl|in forward|forward_call\("},
]
WHERE = {"optimizer": "optimizer.step() (the optimizer's state)",
         "average": "an EMA or SWA update (a copy of the model)",
         "hook": "a hook", "backward": "backward()", "forward": "a forward pass",
         "load": "load_state_dict (loading a checkpoint)"}


# --- 06_any_layer_any_node.ipynb, cell 11 ---
# @title CAUSES: what each cause is, where the chapter shows it, and the question that tells it apart
# Each cause: what it is (with its fix), the chapter section that shows it,
# and the one question or check that tells it from the others.
CAUSES = {
    "stale accumulator": (
        "a parameter reshaped in place (through .data or set_) while an older graph still "
        "held its gradient accumulator", "A helper that says which tensor, and why",
        "did you change a parameter's shape after a forward pass whose graph is still "
        "alive? diagnose_invalid_gradient(error, loss, model) names it"),
    "kept tensor": (
        "a tensor made in an earlier step (a cache, a memory, the last batch's output) "
        "used again after its shape changed: recompute it in every step",
        "Ties, caches and masks",
        "is a tensor from an earlier step or batch used here (two batch sizes)?"),
    "batching rule": (
        "a backward formula's batching rule under vmap (torch.func, functorch): a PyTorch "
        "bug, not yours; report it with a small case", "Not about shapes, or not from backward",
        "is this under torch.func.vmap, jacrev or is_grads_batched?"),
    "sharded placeholder": (
        "a sharded or freed parameter (FSDP, DeepSpeed) whose placeholder of size 0 was "
        "recorded in the graph: run the forward inside the wrapper's context",
        "FSDP2 after pruning", "is the model sharded (FSDP, DeepSpeed ZeRO-3)?"),
    "mask": ("the mask or indices saved by the forward pass select a different number "
             "of rows now: they were changed after the forward (through .data, or a "
             "tensor shared with the pruning code)", "Ties, caches and masks",
             "was a mask or index tensor changed after the forward?"),
    "torchscript": ("a TorchScript graph made before pruning: script or trace the "
                    "pruned model again", "A helper that says which tensor, and why",
                    "is the model scripted or traced?"),
    "compiled": ("a bug of torch.compile's backward (index i is the compiled graph's "
                 "i-th input, parameters first): the same step runs without "
                 "torch.compile; report it with the small case", "torch.compile after pruning",
                 "does the same step run without torch.compile?"),
    "custom Function": (
        "a custom autograd.Function whose backward returns a gradient of another shape "
        "than its input had in the forward: its backward, or an input it does not support",
        "A helper that says which tensor, and why",
        "is the node a torch.autograd.Function of your code or of a library (not torch's)?"),
    "custom C++": ("a node written in C++ (a C++ extension or a custom op): its backward "
                   "returned the wrong shape, or it was made before pruning",
                   "A helper that says which tensor, and why",
                   "is the node from a C++ extension?"),
    "dtype": ("a backward (a custom Function's, or a hook) returned a gradient of another "
              "dtype than the input's", "Not about shapes, or not from backward", ""),
    "layout": ("a backward returned a gradient of another layout (sparse, strided) "
               "than the input's", "Not about shapes, or not from backward", ""),
    "device": ("a backward (a custom Function's, or a hook) returned a gradient on another "
               "device than its input's", "Not about shapes, or not from backward", ""),
    "count": ("a backward returned more or fewer gradients than its forward had "
              "inputs: one gradient (or None) per input", "Not about shapes, or not from backward", ""),
    "type": ("an older torch's check of dtype and device together: compare the "
             "device= and dtype= parts of the two types", "Not about shapes, or not from backward", ""),
    "gradient argument": ("the gradient passed to backward(gradient) or autograd.grad"
                          "(grad_outputs=) does not have the output's shape",
                          "Not about shapes, or not from backward",
                          "does the failing line pass a gradient to backward()?"),
    "complex": ("a backward returned a complex gradient for a real input, or the "
                "reverse", "Not about shapes, or not from backward", ""),
    "hook": ("a hook (a tensor's register_hook, or a module's backward hook) returned a "
             "gradient of another size, dtype or device than the one it was given, or "
             "another number of them: return the same shapes, or None",
             "Not about shapes, or not from backward",
             "does the traceback go through a hook (register_hook, a lambda, a module hook)?"),
    "in-place": ("a tensor saved for backward (here the one named) was changed in "
                 "place after the forward", "Ties, caches and masks", ""),
    "module": ("a module's tensors no longer agree with each other or with its settings "
               "(a cut missed a tensor, a setting or the next layer): run "
               "check_module_shapes(model)", "Not about shapes, or not from backward",
               "did you cut this layer or the one before? check_module_shapes(model) lists it"),
    "input": ("the input does not fit the layer: another model, checkpoint, config or data "
              "than the layer was built for", "Not about shapes, or not from backward",
              "did the same code run before with this model and data, unpruned?"),
    "optimizer state": ("the optimizer's state (Adam's exp_avg, SGD's momentum_buffer) "
                        "still has the old shape: give the optimizer the new parameters, "
                        "or cut its state too", "Not about shapes, or not from backward",
                        "does the traceback go through optimizer.step()?"),
    "average copy": ("an averaged copy of the model (EMA, SWA's AveragedModel) still has "
                     "the old shapes: prune the copy too, or make it again after pruning",
                     "What else holds the old parameters?",
                     "does the traceback go through an EMA or SWA update?"),
    "old grad": ("a .grad of the old shape kept on a parameter: backward adds the new "
                 "gradient to it. Cut the .grad too, or set it to None when you prune",
                 "Not about shapes, or not from backward",
                 "does the traceback go through backward()? check_module_shapes(model) "
                 "compares every .grad"),
    "running stats": ("a norm layer's running_mean and running_var were not cut with its "
                      "channels (or num_features was left): cut the buffers too",
                      "Structural pruning beyond a `Linear` pair",
                      "did you cut the channels before this norm layer?"),
    "layer norm": ("a LayerNorm's normalized_shape, weight and bias no longer agree with "
                   "the features: cut all three with the features",
                   "Structural pruning beyond a `Linear` pair",
                   "did you cut the features this LayerNorm normalizes?"),
    "groups": ("a grouped or depthwise convolution cut without its groups setting: "
               "groups must divide the new channels (set it to the new count for "
               "depthwise)", "Structural pruning beyond a `Linear` pair",
               "is this a grouped or depthwise convolution that you cut?"),
    "bilinear": ("an nn.Bilinear whose weight [out, in1, in2] was cut on one dimension "
                 "but not its input (or in1_features/in2_features)",
                 "Structural pruning beyond a `Linear` pair",
                 "did you cut the features going into this Bilinear?"),
    "empty layer": ("a layer pruned to zero channels: keep at least one channel in every "
                    "layer (lower the pruning ratio of this one)",
                    "Structural pruning beyond a `Linear` pair",
                    "does a layer have 0 channels after pruning?"),
    "index": ("indices made for the old widths (a keep list, class ids, a saved index) "
              "used on a cut tensor: make them again from the new shapes",
              "Ties, caches and masks",
              "were these indices computed before the cut?"),
    "devices": ("two tensors of one operation are on different devices: a tensor made "
                "after model.to(device) (a pruned copy, a new Parameter, a mask or buffer) "
                "or an input not moved: call model.to(device) after pruning",
                "Not about shapes, or not from backward", ""),
    "checkpoint recompute": (
        "a checkpointed segment (torch.utils.checkpoint) computed something else when "
        "its forward was run again during backward: a tensor pruned between the forward "
        "and the backward, or a side effect of the forward (a cache that grows, a "
        "counter). Prune between a backward and the next forward; keep the checkpointed "
        "forward free of side effects",
        "Not about shapes, or not from backward",
        "is torch/utils/checkpoint.py in the traceback?"),
    "recorded before the cut": (
        "a graph recorded with a parameter's old shape: the parameter was cut between a "
        "forward and its backward (in a hook, a callback, the wrong place of a loop), or "
        "the forward used a copy made before the cut (autocast's cast cache, inside one "
        "autocast block). Prune between a backward and the next forward, outside autocast",
        "Not about shapes, or not from backward",
        "does anything cut a parameter after the forward and before backward()?"),
    "state dict": ("a checkpoint that does not fit the model: tensors of other shapes (the "
                   "message gives the checkpoint's shape first, then the model's), or of "
                   "other names (torch.nn.utils.prune's weight_orig and weight_mask, a "
                   "'module.' prefix). A pruned checkpoint and a model of the old widths, "
                   "or the other way; a checkpoint saved with prune's reparametrization "
                   "(call prune.remove before saving). "
                   "Build the model at the checkpoint's widths before loading (save the "
                   "widths beside the state dict), or load first and prune after",
                   "Saving and loading a pruned model", ""),
    "cannot tell": ("the text alone cannot tell", None, ""),
    "other": ("none of these: a cause these rules do not name. Find the operation or node "
              "the message names, the two shapes (or sizes) it compares, and the tensor "
              "that holds each", None, ""),
    "unknown": ("not a message these rules read. The general method: find the operation "
                "or node the message names, the two shapes (or sizes) it compares, and "
                "the tensor that holds each; or let the doctor read your objects: "
                "%load_ext pruning_doctor in your notebook, then run the cell again",
                None, ""),
}


# --- 06_any_layer_any_node.ipynb, cell 12 ---
# @title read_message: reads a pasted error by the tables above
import math
import re
from typing import NamedTuple


def _numbers(text):
    """A shape's text as ints where it can ('s0' stays a str); never raises."""
    parts = [p for p in re.split(r"[, \t\n\r\f\v]+", str(text)) if p]
    return [_int(p) for p in parts]


def _int(text):
    """An int if the text is one of at most 15 digits (exact in JavaScript too)."""
    return int(text) if re.fullmatch(r"-?[0-9]{1,15}", text) else text


def shape_changes(got, expected):
    """[(dim, expected size, got size)] where the two shapes differ, dims
    aligned from the right (as broadcasting aligns them), counted from the end
    when the shapes have different lengths; a dim only one shape has is None
    in the other."""
    if len(got) == len(expected):
        return [(d, e, g) for d, (g, e) in enumerate(zip(got, expected)) if g != e]
    n = max(len(got), len(expected))
    pad = lambda shape: [None] * (n - len(shape)) + list(shape)
    return [(d - n, e, g) for d, (g, e) in enumerate(zip(pad(got), pad(expected)))
            if g != e]


class Reading(NamedTuple):
    """What a pasted error says, read by MESSAGE_RULES."""
    kind: str            # a MESSAGE_RULES kind, or "unknown"
    autograd: bool       # one of the engine's checks of a returned gradient?
    fields: dict         # the rule's groups: node, index, got, expected...
    cause: str           # a key of CAUSES ("cannot tell" when the text cannot)
    where: str = None    # a key of WHERE, from a pasted traceback
    candidates: tuple = ()  # when it cannot tell: the causes, most likely first
    ask: bool = False    # would the traceback decide? (none was pasted)

    @property
    def likely(self):
        if self.cause != "cannot tell":
            return CAUSES[self.cause][0]
        return "the text alone cannot tell: " + "; or ".join(
            f"({n}) {CAUSES[c][0]}" + (f" [{CAUSES[c][2]}]" if CAUSES[c][2] else "")
            for n, c in enumerate(self.candidates, 1))

    @property
    def section(self):
        return CAUSES[(self.candidates or [self.cause])[0]][1]

    def __str__(self):
        f = self.fields
        if self.kind == "unknown":
            return self.likely
        lines = [f"{self.kind} message" + (f" from node {f['node']}" if "node" in f else "")
                 + (f", index {f['index']}" if "index" in f else "")
                 + (f", raised in {WHERE[self.where]}" if self.where else "")]
        if self.kind in ("shape", "gradient argument"):
            for dim, was, now in shape_changes(f["got"], f["expected"]):
                numbers = isinstance(was, int) and isinstance(now, int)
                change = ("missing in got" if now is None else
                          "only in got: summed away if the rest fits" if was is None else
                          f"{was - now} fewer" if numbers and now < was else
                          f"{now - was} more" if numbers else "changed")
                lines.append(f"  dim {dim}: expected {was}, got {now} ({change})")
        elif "got" in f:
            lines.append(f"  got {f['got']}, expected {f.get('expected')}")
        if self.kind == "state dict" and all(
                isinstance(n, int) for n in [*f["got"], *f["expected"]]):
            smaller = math.prod(f["got"]) < math.prod(f["expected"])
            lines.append(f"  the checkpoint's {f['tensor']} is {'smaller' if smaller else 'larger'}"
                         f" than the model's: {'a pruned checkpoint' if smaller else 'a checkpoint of larger widths (unpruned?)'}"
                         f" into a model of {'larger' if smaller else 'smaller (pruned?)'} widths")
        lines.append(f"  likely: {self.likely}")
        if self.ask:
            lines.append("  paste the whole traceback: where it was raised narrows the list")
        if self.cause == "cannot tell":
            lines.append("  or let the doctor look: %load_ext pruning_doctor in your notebook")
        return "\n".join(lines)


def _where(text):
    """The WHERE key of the innermost frame of a traceback that names one."""
    best, at = None, -1
    for rule in WHERE_RULES:
        for match in re.finditer(rule["pattern"], text, re.IGNORECASE | re.ASCII):
            if match.end() > at:
                best, at = rule["where"], match.end()
    return best


def read_message(text):
    """A Reading of a message or a whole traceback (a str), or of an exception
    (its str); never raises on either: text no rule matches reads as kind
    "unknown". Anything else (None, bytes, a number) is a TypeError."""
    if not isinstance(text, (str, BaseException)):
        raise TypeError(f"read_message reads a str or an exception, got {type(text).__name__}")
    try:
        text = re.sub(SPACE, " ", re.sub(WRAP, "", re.sub(DASH, "-", str(text))))
        text = text.strip(" ")[-200_000:]
        for rule in MESSAGE_RULES:                     # ASCII: as JavaScript reads
            match = re.search(rule["pattern"], text, re.IGNORECASE | re.ASCII)
            if match is None:
                continue
            fields = dict(zip(rule["groups"], match.groups()))
            fields.update({k: _numbers(fields[k]) for k in rule["shapes"]})
            fields.update({k: _int(fields[k]) for k in rule["ints"]})
            where = _where(text[:match.start()])
            decision = rule["cause"]
            if decision == "built-in":
                decision = next(r["cause"] for r in NODE_RULES
                                if re.search(r["pattern"], fields["node"], re.ASCII))
            decision = next((h["cause"] for h in HINT_RULES if rule["kind"] in h["kinds"]
                             and re.search(h.get("node", ""), str(fields.get("node", "")))
                             and re.search(h["pattern"], text, re.IGNORECASE | re.ASCII)),
                            decision)
            ask = "where" in rule and where is None
            decision = rule.get("where", {}).get(where or "none", decision)
            if isinstance(decision, str):
                return Reading(rule["kind"], rule["autograd"], fields, decision, where)
            return Reading(rule["kind"], rule["autograd"], fields, "cannot tell", where,
                           (*decision, "other"), ask)     # never the whole story
    except Exception as error:                 # a bug here must not hide the text
        return Reading("unknown", False, {"reader error": repr(error)}, "unknown")
    return Reading("unknown", False, {}, "unknown")


# --- 06_any_layer_any_node.ipynb, cell 13 ---
import gc
import sys

import torch
from torch import nn
from typing import NamedTuple


class InvalidGradient(NamedTuple):
    """The four facts in an "invalid gradient ... shape" message."""
    node: str        # the node that returned the gradient, e.g. TBackward0
    index: int       # which of its outputs: the edge to follow
    got: list        # the shape of the gradient it returned
    expected: list   # the shape recorded at the end of that edge


def parse_invalid_gradient(error):
    """An InvalidGradient from an exception or its message (read by
    read_message); ValueError for any other message, saying what it is."""
    if not isinstance(error, (BaseException, str)):
        raise TypeError(f"error must be an exception or a str, got {type(error).__name__}")
    reading = read_message(error)
    if reading.kind != "shape":
        raise ValueError(f"not an 'invalid gradient' shape message: {reading.likely}")
    f = reading.fields
    return InvalidGradient(f["node"], f["index"], f["got"], f["expected"])


# --- 06_any_layer_any_node.ipynb, cell 18 ---
class Diagnosis(NamedTuple):
    """What an error is about, what was seen, and what to do."""
    error: object        # InvalidGradient, or the Reading of another message
    cause: str           # a key of FIXES
    tensor: str          # the parameter's name, or what sits at the edge
    recorded: list       # the shape recorded at the end of the edge
    current: list        # the parameter's shape now (None if not a leaf)
    evidence: tuple = ()  # what was seen (and what could not be seen)
    advice: str = ""     # a fix that fits the evidence, if it changes FIXES'

    @property
    def fix(self):
        return self.advice or FIXES[self.cause]

    def __str__(self):
        e = self.error
        if not isinstance(e, InvalidGradient):
            head = str(e)
        else:
            now = "" if self.current is None else f", is now {self.current}"
            head = (f"{e.node} returned a gradient of shape {e.got} for input "
                    f"{e.index}: {self.tensor}\n  recorded {self.recorded}{now}")
        seen = "".join(f"\n  seen: {line}" for line in self.evidence)
        return f"{head}{seen}\n  cause: {self.cause}: {self.fix}"


# --- 06_any_layer_any_node.ipynb, cell 19 ---
# @title FIXES: the general advice for each cause
FIXES = {
    "stale accumulator": (
        "a leaf was reshaped (through .data) while an older graph still holds its "
        "gradient accumulator, which recorded the old shape. Drop every reference "
        "to the old graph before pruning, or give the layer a new nn.Parameter "
        "(and move the optimizer to it). A new optimizer does not help."),
    "custom autograd.Function": (
        "the backward() of a custom autograd.Function returned a gradient of "
        "another shape than this input: its backward, or an input of a shape it "
        "was not written for (one gradient per forward input, each of that "
        "input's shape, or None)."),
    "reused non-leaf": (
        "a non-leaf tensor made by an earlier graph was reshaped after it was "
        "made and used again: recompute it from the parameters in every forward "
        "pass instead of keeping it."),
    "mask changed": (
        "the mask or indices the forward pass saved were changed after it: build "
        "the mask anew for each forward pass (never edit it through .data), and "
        "recompute the forward after pruning."),
    "old grad": (
        "a .grad of another shape than its parameter: kept from before the cut (and "
        "backward adds to it), or made by a backward through a graph recorded before "
        "the cut (seen above, if so). Set every .grad to None when you prune "
        "(optimizer.zero_grad() does, unless set_to_none=False), and compute the loss "
        "again after the cut."),
    "recorded before the cut": (
        "the graph that backward ran through recorded the parameter's old shape: "
        "it was cut between a forward and its backward (in a hook, a callback, "
        "the wrong place of a loop), or the forward used a copy made before the "
        "cut (autocast keeps its casts of the weights until its block ends). "
        "Prune between a backward and the next forward, outside any autocast "
        "block, and compute the loss again."),
    "hook": (
        "a hook registered on the parameter holds a tensor of the old shape (a "
        "mask): remove the hook when you prune and register it again with the "
        "cut tensor."),
    "kept tensor": (
        "a tensor made before the cut (a dict of parameters for functional_call, a "
        "cache, a saved state) is used after it: make it again from the model "
        "after pruning."),
    "optimizer state": (
        "the optimizer's state (Adam's exp_avg, a momentum buffer) kept the old shape: "
        "cut it the same way as the parameter, or drop it (optimizer.state.pop(param)), "
        "or build the optimizer anew after pruning."),
    "not a shape message": "see the reading above: this message is not about shapes.",
    "forward error": (
        "the error did not come from the backward's check: the model's tensors "
        "disagree with its settings (check_module_shapes lists them); cut every "
        "tensor a setting lives in, and update the setting."),
    "unknown": "no known cause matches: the shapes above are all that is known.",
}


# --- 06_any_layer_any_node.ipynb, cell 21 ---
# @title The evidence: graph walks, recorded shapes, ties, old graphs, masks
import gc
import sys

import torch
from torch import nn


def _fits(shape, grad_shape):
    """Can a gradient of grad_shape be summed down to shape (broadcasting)?"""
    if len(shape) > len(grad_shape):
        return False
    return all(s == g or s == 1 for s, g in zip(reversed(shape), reversed(grad_shape)))


def _nodes(outputs):
    """Every node of the graphs behind `outputs`, each once."""
    seen, todo = {}, [t.grad_fn for t in outputs if t.grad_fn is not None]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        todo.extend(next_node for next_node, _ in node.next_functions)
    return list(seen.values())


def _recorded(node, input_nr):
    metadata = getattr(node, "_input_metadata", None)   # torch >= 2.5
    return None if metadata is None else list(metadata[input_nr].shape)


def _tied_owners(model, leaf):
    """Names of the modules of `model` that hold `leaf` as a parameter."""
    return [name or "the model" for name, module in model.named_modules()
            if any(p is leaf for p in module._parameters.values())]


def _variable_name(tensor):
    """The notebook's name for a tensor: a variable, or an item of a list,
    tuple or dict one (history[0], state[1], acts['hidden'])."""
    for name, value in vars(sys.modules["__main__"]).items():
        if name.startswith("_"):
            continue
        if value is tensor:
            return f"{name!r}"
        if isinstance(value, nn.Module):           # an attribute or buffer of a module
            for path, module in value.named_modules():
                for attr, held in [*vars(module).items(), *module._buffers.items()]:
                    if held is tensor:
                        return f"'{'.'.join(filter(None, [name, path, attr]))}'"
            continue
        if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
            items = enumerate(value[:1000])
        elif isinstance(value, dict):
            items = list(value.items())[:1000]
        else:
            continue
        for key, item in items:
            if item is tensor:
                return f"'{name}[{key!r}]'"
    return "a tensor"


def _other_graphs(target, outputs, in_this_loss):
    """Live tensors (not `outputs`) whose graph reaches the node `target`:
    [(description, part of this loss?, the root of its graph)]."""
    found = []
    for obj in gc.get_objects():       # type(), not isinstance: some objects warn
        if not issubclass(type(obj), torch.Tensor) or any(obj is t for t in outputs):
            continue
        root = obj.grad_fn
        if root is None:
            continue
        seen, todo = set(), [root]
        while todo:
            node = todo.pop()
            if node is None or id(node) in seen:
                continue
            if node is target:
                found.append((f"{_variable_name(obj)} of shape {list(obj.shape)}, "
                              f"made by {root.name()}", id(root) in in_this_loss, root))
                break
            seen.add(id(node))
            todo.extend(n for n, _ in node.next_functions)
    return found


def _stale_evidence(leaf, name, target, outputs, nodes, model):
    """(evidence, advice) for a stale accumulator: ties, caches, old graphs."""
    evidence, advice = [], ""
    owners = [] if model is None else _tied_owners(model, leaf)
    if len(owners) > 1:
        evidence.append(f"{name} is tied: held by {', '.join(owners)}")
        advice = (f"give the tied weight ONE new nn.Parameter and assign that same "
                  f"object to each of {', '.join(owners)} (so the tie stays), cut "
                  "along the dimension every holder reads the same way, and move "
                  "the optimizer to it.")
    holders = _other_graphs(target, outputs, {id(n) for n in nodes})
    before = {id(root): _made_before_cut(root, target, _recorded(target, 0), list(leaf.shape))
              for _, in_loss, root in holders if in_loss}
    cached = [what for what, in_loss, root in holders if in_loss and before[id(root)]]
    unsure = [what for what, in_loss, root in holders
              if in_loss and before[id(root)] is None]
    old = [what for what, in_loss, _ in holders if not in_loss]
    for what in cached:
        evidence.append(f"{what} is part of this loss and reaches the parameter, and its "
                        "graph saved the parameter at its old shape: a cache computed "
                        "before pruning, which holds the old graph")
    for what in unsure:
        evidence.append(f"{what} is part of this loss and reaches the parameter: a cache "
                        "if it was computed before pruning (its graph no longer shows)")
    for what in old:
        evidence.append(f"{what} holds another graph through the parameter")
    if cached:
        advice = ((advice + " ") if advice else "") + (
            "recompute the cached tensor after pruning (or detach it): a new "
            "Parameter alone would send the cache's gradient to the orphaned old "
            "weight.")
    if not (cached or unsure or old):
        evidence.append("no live Python tensor outside this loss holds a graph "
                        "through the parameter now: an old graph was alive when this "
                        "loss was computed (a name still bound to the old loss until "
                        "it was reassigned, as x in the question's test1), or something "
                        "outside Python holds it (the state of a failed backward); this "
                        "loss reuses its accumulator either way, so drop this loss too "
                        "before computing it again, or give the layer a new Parameter")
    return evidence, advice


def _mask_evidence(node):
    """What the index or mask a node saved selects now."""
    saved = getattr(node, "_saved_indices", None)
    saved = [getattr(node, "_saved_mask", None)] if saved is None else list(saved)
    lines = []
    for i, index in enumerate(saved):
        if isinstance(index, torch.Tensor) and index.dtype == torch.bool:
            lines.append(f"the saved mask {i} selects {int(index.sum())} of "
                         f"{index.numel()} entries now")
        elif isinstance(index, torch.Tensor):
            lines.append(f"the saved index {i} holds {index.numel()} entries now")
    return lines or ["the node saved no index or mask this torch shows"]


# --- 06_any_layer_any_node.ipynb, cell 22 ---
# @title Made before the cut, or after? What a graph recorded of a parameter
import torch


def _made_before_cut(root, target, old, new, limit=10_000):
    """Did the graph behind `root` use the parameter at its shape `old` (True:
    made before the cut), at `new` (False: made after it), or cannot it tell
    (None)? Read from what the nodes that take the parameter (an edge to
    `target`) recorded of their inputs' shapes, and from the tensors the graph
    saved (gone where a backward ran); a 2-d weight may appear transposed."""
    seen, todo, shapes = set(), [root], set()
    while todo and len(seen) < limit:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if any(n is target for n, _ in node.next_functions):
            for meta in getattr(node, "_input_metadata", None) or ():
                shapes |= {tuple(meta.shape), tuple(meta.shape)[::-1]}
        for attr in dir(node):
            if attr.startswith("_saved_"):
                try:
                    value = getattr(node, attr)
                except Exception:                 # freed by a backward
                    continue
                if isinstance(value, torch.Tensor):
                    shapes |= {tuple(value.shape), tuple(value.shape)[::-1]}
        todo.extend(n for n, _ in node.next_functions)
    had_old, had_new = tuple(old or ()) in shapes, tuple(new) in shapes
    return None if had_old == had_new else had_old


# --- 06_any_layer_any_node.ipynb, cell 23 ---
# @title What one candidate edge (or a message of another kind) means
import torch


def _other_message(reading, model):
    """The Diagnosis of a message that is not the backward's shape check."""
    problems = [] if model is None else check_module_shapes(model)
    found = [p for p in problems if p.kind != "unchecked"]   # not "could not read"
    evidence = tuple(str(p) for p in problems) or (
        ("no model given: its tensors were not checked",) if model is None
        else ("every module's tensors agree with its settings, and every link "
              "between modules that was read agrees",))
    cause = "forward error" if found else "not a shape message"
    return Diagnosis(reading, cause, "", None, None, evidence,
                     "" if found else reading.likely)


def _edge_diagnosis(parsed, reading, node, target, names, outputs, nodes, model):
    """The Diagnosis of one candidate: `node` named in the message, and
    `target`, the node at the end of its edge `index`."""
    custom = isinstance(node, torch.autograd.function.BackwardCFunction)
    masked = "mask" in (reading.cause, *reading.candidates)
    if hasattr(target, "variable"):   # AccumulateGrad: a leaf
        leaf = target.variable
        name = names.get(id(leaf), f"an unnamed leaf of shape {list(leaf.shape)}")
        current = list(leaf.shape)
        stale = current != parsed.expected and _fits(current, parsed.got)
        cause = ("stale accumulator" if stale else
                 "custom autograd.Function" if custom else
                 "mask changed" if masked else "unknown")
        evidence, advice = ((_stale_evidence(leaf, repr(name), target, outputs,
                                             nodes, model)) if stale else
                            (_mask_evidence(node), "") if masked else ([], ""))
        return Diagnosis(parsed, cause, f"parameter {name!r}",
                         parsed.expected, current, tuple(evidence),
                         advice)
    else:
        cause = ("custom autograd.Function" if custom else
                 "mask changed" if masked else "reused non-leaf")
        return Diagnosis(
            parsed, cause, f"the output of {target.name()} (a non-leaf)",
            parsed.expected, None,
            tuple(_mask_evidence(node)) if masked else ())


# the most specific cause first, when several nodes of the name fit
_RANKED = ["stale accumulator", "mask changed", "custom autograd.Function",
           "reused non-leaf", "unknown"]


# --- 06_any_layer_any_node.ipynb, cell 24 ---
# @title The guard: diagnose_invalid_gradient never raises
import functools

import torch
from torch import nn


def _never_raises(diagnose):
    """diagnose_invalid_gradient's guard: an argument it cannot use is set aside
    and named in the evidence; a failure inside becomes a Diagnosis of cause
    "unknown" that says what stopped it."""
    @functools.wraps(diagnose)
    def guarded(error, outputs=(), model=None):
        notes = []
        if isinstance(outputs, torch.Tensor):
            outputs = [outputs]
        try:
            items = list(outputs)
        except TypeError:
            items = []
        if not all(isinstance(t, torch.Tensor) for t in items) or (
                not items and not isinstance(outputs, (list, tuple))):
            notes.append(f"outputs must be a tensor or a list of tensors, got "
                         f"{type(outputs).__name__}: only its tensors were read")
            items = [t for t in items if isinstance(t, torch.Tensor)]
        if model is not None and not isinstance(model, nn.Module):
            notes.append(f"model must be an nn.Module, got {type(model).__name__}: "
                         "its tensors were not checked")
            model = None
        try:
            diagnosis = diagnose(error, items, model)
        except Exception as failure:          # never raise: say what stopped it
            try:
                reading = read_message(error)
            except Exception:
                reading = f"a {type(error).__name__} that could not be read"
            diagnosis = Diagnosis(reading, "unknown", "", None, None, (
                f"the diagnosis stopped: {type(failure).__name__}: {failure}",))
        return diagnosis._replace(evidence=tuple(notes) + tuple(diagnosis.evidence))
    return guarded


# --- 06_any_layer_any_node.ipynb, cell 26 ---
@_never_raises
def diagnose_invalid_gradient(error, outputs, model=None):
    """Say which tensor an error is about, why, and what to do, from evidence.

    `error` is the exception (or its text); `outputs` the tensor(s) whose
    backward() failed (their graph is still there after the failure);
    `model`, if given, names the parameters, and is checked by
    check_module_shapes when the message is not a shape message of the
    backward. Any text gets a Diagnosis, and nothing raises: the guard
    (folded above) gives this function a list of tensors and a module or None.
    """
    reading = read_message(error)
    if reading.kind != "shape":
        return _other_message(reading, model)
    parsed = parse_invalid_gradient(error)
    names = {} if model is None else {id(p): n for n, p in model.named_parameters()}
    nodes = _nodes(outputs)
    candidates = []
    for node in nodes:
        if node.name() != parsed.node or parsed.index >= len(node.next_functions):
            continue
        target, input_nr = node.next_functions[parsed.index]
        if target is None:
            continue
        recorded = _recorded(target, input_nr)
        if recorded is not None and recorded != parsed.expected:
            continue                      # another node of the same kind
        candidates.append(_edge_diagnosis(parsed, reading, node, target, names,
                                          outputs, nodes, model))
    if not candidates:
        return Diagnosis(parsed, "unknown", f"no {parsed.node} in these outputs' graph",
                         parsed.expected, None,
                         (f"the graph of these outputs has no node {parsed.node}: pass "
                          "the tensor whose backward() failed",))
    return min(candidates, key=lambda d: _RANKED.index(d.cause))


# --- 06_any_layer_any_node.ipynb, cell 49 ---
import gc
import sys
import types

import torch


def _reaches(root, target, limit=100_000):
    """Does the graph behind `root` (a node) contain `target` (a node)?

    Visited nodes are kept in `seen`: some torch releases make a new Python
    object for a node each time it is reached once the last one died, so
    only live objects can be compared by identity."""
    seen, todo = {}, [root]
    while todo and len(seen) < limit:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        if node is target:
            return True
        seen[id(node)] = node
        todo.extend(next_node for next_node, _ in node.next_functions)
    return False


# --- 06_any_layer_any_node.ipynb, cell 51 ---
# @title _describe: how a referrer holds a tensor, in one line
def _describe(holder, held, namespace):
    """One line saying how `holder` (a gc referrer) holds `held`."""
    if isinstance(holder, dict):
        keys = [k for k, v in holder.items() if v is held]
        if holder is namespace:
            return f"the variable {keys[0]!r}"
        owner = [k for k, v in namespace.items() if v is holder]
        where = f"dict {owner[0]!r}" if owner else "a dict"
        return f"{where}[{keys[0]!r}]"
    if isinstance(holder, list):
        owner = [k for k, v in namespace.items() if v is holder]
        where = f"list {owner[0]!r}" if owner else "a list"
        index = next(i for i, v in enumerate(holder) if v is held)
        return f"{where}[{index}] (of {len(holder)} items)"
    if isinstance(holder, types.CellType):
        for function in gc.get_referrers(*gc.get_referrers(holder)):
            if isinstance(function, types.FunctionType) and function.__closure__ \
                    and holder in function.__closure__:
                index = function.__closure__.index(holder)
                variable = function.__code__.co_freevars[index]
                return f"the closure variable {variable!r} of function {function.__name__!r}"
        return "a closure cell"
    if isinstance(holder, types.FrameType):   # (f_locals is not read: in
        tracebacks = [t for t in gc.get_referrers(holder)   # Python 3.11 that
                      if isinstance(t, types.TracebackType)]  # would keep a copy)
        kept = " (kept alive by a traceback)" if tracebacks else ""
        return f"a local variable of the frame of {holder.f_code.co_name!r}{kept}"
    return f"a {type(holder).__name__}"


# --- 06_any_layer_any_node.ipynb, cell 52 ---
def graph_holders(param, namespace=None):
    """Who keeps alive a graph that holds `param`'s gradient accumulator.

    Every live tensor whose graph contains the accumulator is found (through
    the garbage collector's list of objects), then what refers to it: a
    variable of `namespace` (default: the caller's globals), an item of a
    list or dict, a closure, a frame's local kept by a traceback. Returns
    lines of text; [] if no live graph holds the accumulator.
    """
    if not isinstance(param, torch.Tensor) or param.grad_fn is not None \
            or not param.requires_grad:
        raise TypeError("param must be a leaf tensor that requires grad")
    if namespace is None:
        namespace = sys._getframe(1).f_globals
    with torch.inference_mode(False):
        accumulator = torch.autograd.graph.get_gradient_edge(param).node
    roots = [obj for obj in gc.get_objects()
             if type(obj) in (torch.Tensor, torch.nn.Parameter)
             and obj.grad_fn is not None and _reaches(obj.grad_fn, accumulator)]
    del accumulator        # a node created just now dies here
    lines = []
    for tensor in roots:
        for holder in gc.get_referrers(tensor):
            if holder is roots or (isinstance(holder, types.FrameType)
                    and holder.f_code is graph_holders.__code__):
                continue                  # this function's own references
            lines.append(f"{list(tensor.shape)} tensor from {tensor.grad_fn.name()}, "
                         f"held by {_describe(holder, tensor, namespace)}")
    return lines


# --- 06_any_layer_any_node.ipynb, cell 62 ---
# @title chapter 4's checks and slicing, which prune_channels shares (copied from chapter 4)
# Copied from chapter 4 (04_every_way_out.ipynb), where it is explained.
# Written by `make generate`: edit the original, not this copy.
import torch
from torch import nn


def _sliced(tensor, dim, keep):
    """A new contiguous tensor: `tensor` restricted to `keep` along `dim`."""
    return tensor.detach().index_select(dim, keep.to(tensor.device)).clone()


def _new_parameter(old, dim, keep):
    """A new nn.Parameter holding `old[keep]` along `dim`, with its grad sliced too."""
    new = nn.Parameter(_sliced(old, dim, keep), requires_grad=old.requires_grad)
    if old.grad is not None:
        new.grad = _sliced(old.grad, dim, keep)
    return new


def _sliced_state(state, old, dim, keep):
    """State for the new parameter: tensors of its shape sliced, the rest kept."""
    new_state = {}
    for key, value in state.items():
        if isinstance(value, torch.Tensor) and value.shape == old.shape:
            new_state[key] = _sliced(value, dim, keep)
        elif isinstance(value, torch.Tensor) and value.dim() > 0:
            raise ValueError(
                f"optimizer state {key!r} has shape {list(value.shape)}, neither the "
                f"parameter's {list(old.shape)} nor a scalar: cannot slice it")
        else:
            new_state[key] = value
    return new_state


# --- 06_any_layer_any_node.ipynb, cell 63 ---
# @title The argument checks: keep as sorted indices, optimizer as a list (copied from chapter 4)
# Copied from chapter 4 (04_every_way_out.ipynb), where it is explained.
# Written by `make generate`: edit the original, not this copy.
import numbers

import torch
from torch import nn

_INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _as_keep_indices(keep, n_hidden):
    """`keep` as a sorted 1-D int64 tensor, or a clear TypeError/ValueError."""
    if isinstance(keep, (list, tuple)):
        bad = [k for k in keep
               if isinstance(k, bool) or not isinstance(k, numbers.Integral)]
        if bad:
            raise TypeError(f"keep must hold integers, got {bad[0]!r}")
        keep = torch.tensor([int(k) for k in keep], dtype=torch.int64)
    elif isinstance(keep, torch.Tensor):
        if keep.dtype not in _INTEGER_DTYPES:
            raise TypeError(f"keep must be an integer tensor, got dtype {keep.dtype}")
        if keep.dim() != 1:
            raise ValueError(f"keep must be 1-D, got shape {list(keep.shape)}")
        keep = keep.detach().to("cpu", torch.int64)
    else:
        raise TypeError("keep must be a 1-D integer tensor or a list of ints, "
                        f"got {type(keep).__name__}")
    if keep.numel() == 0:
        raise ValueError("keep is empty: a layer needs at least one hidden neuron")
    out_of_range = keep[(keep < 0) | (keep >= n_hidden)]
    if out_of_range.numel():
        raise ValueError(f"keep index {out_of_range[0].item()} is out of range "
                         f"for {n_hidden} hidden neurons")
    keep = keep.sort().values
    if keep.numel() != keep.unique_consecutive().numel():
        duplicated = keep[1:][keep[1:] == keep[:-1]][0].item()
        raise ValueError(f"keep has duplicate index {duplicated}")
    return keep


def _as_optimizers(optimizer):
    """None, one optimizer or a list/tuple of them, as a list; LBFGS refused."""
    if optimizer is None:
        return []
    optimizers = list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer]
    for opt in optimizers:
        if not isinstance(opt, torch.optim.Optimizer):
            raise TypeError("optimizer must be a torch.optim.Optimizer, a list of "
                            f"them, or None, got {type(opt).__name__}")
        if isinstance(opt, torch.optim.LBFGS):
            raise TypeError("LBFGS keeps its state as flat vectors over all its "
                            "parameters, which cannot be sliced per parameter: "
                            "prune first, then build a new LBFGS")
    return optimizers


# --- 06_any_layer_any_node.ipynb, cell 64 ---
# @title What sits around the pair: per-feature layers, tied parameters, optimizers not passed (copied from chapter 4)
# Copied from chapter 4 (04_every_way_out.ipynb), where it is explained.
# Written by `make generate`: edit the original, not this copy.
import gc

from torch import nn


def _per_feature_modules_between(container, first, second):
    """Modules between first and second in a Sequential-like container that hold
    a tensor of more than one element (a norm layer, a PReLU per channel)."""
    children = list(container.values())
    where = [i for i, m in enumerate(children) if m is first or m is second]
    if len(where) != 2 or not all(key.isdigit() for key in container):
        return []
    found = []
    for module in children[where[0] + 1:where[1]]:
        tensors = [t for m in module.modules() for t in
                   [*m._parameters.values(), *m._buffers.values()] if t is not None]
        if any(t.numel() > 1 for t in tensors):
            found.append(module)
    return found


def _check_surroundings(first, second, old_params, optimizers, model):
    """Refuse what would break later: a per-feature layer between the pair, a
    parameter shared with another module, an optimizer that was not passed.

    With `model`, its modules are searched (optimizers not passed are not
    seen). Without it, the garbage collector's referrers are (slower)."""
    between, others = [], []
    known = {id(first._parameters), id(second._parameters)}
    if model is not None:
        for module in model.modules():
            between += _per_feature_modules_between(module._modules, first, second)
            if id(module._parameters) not in known and any(
                    p is old for p in module._parameters.values() for old in old_params):
                others.append(f"a {type(module).__name__} of the model")
    else:
        group_lists = {id(g["params"]) for o in optimizers for g in o.param_groups}
        suspects = []
        for referrer in gc.get_referrers(first, second, *old_params):
            if isinstance(referrer, dict) and any(v is first for v in referrer.values()) \
                    and any(v is second for v in referrer.values()):
                between += _per_feature_modules_between(referrer, first, second)
            elif isinstance(referrer, dict) and id(referrer) not in known and any(
                    v is old for v in referrer.values() for old in old_params):
                suspects.append(referrer)       # another module's _parameters?
            elif isinstance(referrer, list) and id(referrer) not in group_lists:
                suspects.append(referrer)       # another optimizer's group?
        for holder in (gc.get_referrers(*suspects) if suspects else []):
            if isinstance(holder, nn.Module) and any(
                    holder._parameters is s for s in suspects):
                others.append(f"another {type(holder).__name__}")
            elif isinstance(holder, dict) and any(
                    holder.get("_parameters") is s for s in suspects):
                others.append("another module")
            elif isinstance(holder, dict) and "lr" in holder and "__name__" not in \
                    holder and any(holder.get("params") is s for s in suspects):
                others.append("an optimizer that was not passed")
    if between:
        names = ", ".join(type(m).__name__ for m in between)
        raise ValueError(
            f"{names} sits between first and second and holds per-feature tensors "
            "of the hidden width: pruning only the two Linear layers would break "
            "the next forward pass; prune it together with them, or remove it")
    if others:
        raise ValueError(
            f"a parameter of the pair is also held by {others[0]} (a tied "
            "parameter, or an optimizer not passed): replacing it would untie "
            "it or leave the old tensor there; untie it first, or pass every "
            "optimizer (a list)")


# --- 06_any_layer_any_node.ipynb, cell 65 ---
import torch
from torch import nn

_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def _channel_tensors(module, role):
    """[(attribute, dim)] of `module`'s tensors indexed by the pruned channel,
    and the name of its size attribute. role: producer, between, consumer."""
    if isinstance(module, nn.Linear) and role != "between":
        return ([("weight", 0), ("bias", 0)], "out_features") if role == "producer" \
            else ([("weight", 1)], "in_features")
    if isinstance(module, _CONVS) and role != "between":
        if module.groups != 1:
            raise ValueError(f"a {type(module).__name__} with groups={module.groups}: "
                             "only groups=1 is supported")
        return ([("weight", 0), ("bias", 0)], "out_channels") if role == "producer" \
            else ([("weight", 1)], "in_channels")
    if role == "between" and isinstance(module, _BATCH_NORMS):
        return ([("weight", 0), ("bias", 0), ("running_mean", 0), ("running_var", 0)],
                "num_features")
    if role == "between" and isinstance(module, nn.PReLU) and module.num_parameters > 1:
        return [("weight", 0)], "num_parameters"
    if role == "between" and not any(True for _ in module.parameters()) \
            and not any(t.numel() > 1 for t in module.buffers()):
        return [], None                       # ReLU, Dropout, a single-slope PReLU...
    if role == "between" and isinstance(module, nn.PReLU):
        return [], None
    raise TypeError(
        f"cannot prune channels through a {type(module).__name__} as {role}: "
        "supported are Linear and Conv (groups=1) on both ends, and between them "
        "BatchNorm, PReLU and parameter-free layers. A LayerNorm or GroupNorm "
        "normalises over several channels, so removing one changes the others: "
        "prune it by hand and retrain")


# --- 06_any_layer_any_node.ipynb, cell 67 ---
# @title prune_channels' checks: the layers between, widths, masks, ties
def _between_in_sequential(model, producer, consumer):
    """The modules between producer and consumer in a Sequential of `model`."""
    for module in model.modules():
        children = list(module.children())
        if isinstance(module, nn.Sequential) and producer in children \
                and consumer in children:
            start = next(i for i, m in enumerate(children) if m is producer)
            end = next(i for i, m in enumerate(children) if m is consumer)
            if start < end:
                return children[start + 1:end]
    raise ValueError("producer and consumer are not in one nn.Sequential of model, "
                     "in that order: pass between=[...] (the modules between them, "
                     "[] if none)")


def _channel_cuts(model, producer, consumer, keep, optimizer, between):
    """prune_channels' checks, before anything changes: returns the cuts
    [(module, attribute, dim, size attribute)], `keep` as sorted indices and
    the optimizers as a list; or raises a TypeError/ValueError."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    members = {id(m) for m in model.modules()}
    for name, module in (("producer", producer), ("consumer", consumer)):
        if not isinstance(module, nn.Module) or id(module) not in members:
            raise ValueError(f"{name} must be a module of model")
    between = (_between_in_sequential(model, producer, consumer) if between is None
               else list(between))
    roles = [(producer, "producer")] + [(m, "between") for m in between] + \
            [(consumer, "consumer")]
    optimizers = _as_optimizers(optimizer)              # chapter 4's checks
    cuts = []                  # (module, attribute, dim, size attribute)
    for module, role in roles:
        tensors, size_name = _channel_tensors(module, role)
        cuts += [(module, attr, dim, size_name) for attr, dim in tensors
                 if getattr(module, attr, None) is not None]
    width = getattr(producer, _channel_tensors(producer, "producer")[1])
    for module, attr, dim, _ in cuts:
        value = getattr(module, attr)
        if attr in module._parameters and not isinstance(value, nn.Parameter):
            raise TypeError(f"{type(module).__name__}.{attr} is not an nn.Parameter "
                            "(a mask or parametrization? remove it first)")
        if value.shape[dim] != width:
            raise ValueError(f"{type(module).__name__}.{attr} has {value.shape[dim]} "
                             f"channels along dim {dim}, the producer {width}")
    keep = _as_keep_indices(keep, width)                # chapter 4's checks
    owners = {}
    for module in model.modules():
        for param in module._parameters.values():
            if param is not None:
                owners.setdefault(id(param), set()).add(id(module))
    for module, attr, _, _ in cuts:
        if len(owners.get(id(getattr(module, attr)), ())) > 1:
            raise ValueError(f"{type(module).__name__}.{attr} is tied to another "
                             "module of model: untie it first")
    return cuts, keep, optimizers


# --- 06_any_layer_any_node.ipynb, cell 69 ---
def prune_channels(model, producer, consumer, keep, optimizer=None, between=None):
    """Keep the channels (or hidden neurons) `keep` between `producer` and
    `consumer`, and in every layer between them, in place and atomically.

    producer, consumer: nn.Linear or nn.ConvNd (groups=1) of `model`; between
    them (found in model's Sequential, or given as `between`) BatchNorm, a
    per-channel PReLU, and parameter-free layers. Every parameter touched
    becomes a NEW nn.Parameter, grads and optimizer state are sliced, buffers
    replaced, sizes updated. On TypeError/ValueError nothing has changed.
    Returns the new width.
    """
    cuts, keep, optimizers = _channel_cuts(model, producer, consumer, keep,
                                           optimizer, between)

    new_values = []            # built first; nothing has changed yet
    with torch.inference_mode(False), torch.no_grad():
        for module, attr, dim, _ in cuts:
            old = getattr(module, attr)
            new = (_new_parameter(old, dim, keep) if isinstance(old, nn.Parameter)
                   else _sliced(old, dim, keep))        # a buffer
            states = [(opt, _sliced_state(opt.state[old], old, dim, keep))
                      for opt in optimizers if old in opt.state]
            new_values.append((module, attr, old, new, states))

    for module, attr, old, new, states in new_values:       # commit
        setattr(module, attr, new)
        for opt in optimizers:
            for group in opt.param_groups:
                params = group["params"]
                params[:] = [new if p is old else p for p in params]
        for opt, state in states:
            del opt.state[old]
            opt.state[new] = state
    for module, _, _, size_name in cuts:
        if size_name is not None:
            setattr(module, size_name, len(keep))
    return len(keep)


# --- 06_any_layer_any_node.ipynb, cell 92 ---
# @title MODULE_SHAPES: which settings each tensor's dimensions follow, for each module class
import math

from torch import nn

# For each module class: its tensors {attribute: dims} and what a consistent cut
# touches. A dim is a setting's name (its size is the setting), (setting,
# factor) (factor * the setting), an int, or None (free). Settings are read from
# the module. A class whose tensors depend on more than its settings has a
# function instead: module -> (tensors, cut, {setting: value} it computes).


def _conv_rule(m):
    g, cin, cout = m.groups, m.in_channels, m.out_channels
    valid = g > 0 and cin % g == 0 and cout % g == 0
    kernel = {f"kernel_size[{i}]": k for i, k in enumerate(m.kernel_size)}
    if m.transposed:
        settings = {"in_channels": cin, "out_channels": cout,
                    "out_channels/groups": cout // g if valid else 0, **kernel}
        weight = ["in_channels", "out_channels/groups" if valid else None, *kernel]
        cut = ("A ConvTranspose's weight is [in_channels, out_channels/groups, "
               "*kernel]: its output channels are dim 1 (and bias), its input "
               "channels dim 0, the reverse of a Conv.")
    else:
        settings = {"out_channels": cout, "in_channels/groups": cin // g if valid else 0,
                    **kernel}
        weight = ["out_channels", "in_channels/groups" if valid else None, *kernel]
        cut = ("A Conv's weight is [out_channels, in_channels/groups, *kernel]: "
               "output channels are dim 0 (and bias), input channels dim 1.")
    return {"weight": weight, "bias": ["out_channels"]}, cut, settings


def _normalized_rule(m):
    names = {f"normalized_shape[{i}]": s for i, s in enumerate(m.normalized_shape)}
    return ({"weight": [*names], "bias": [*names]},
            f"{type(m).__name__}'s weight and bias follow normalized_shape.", names)


def _mha_rule(m):
    if m._qkv_same_embed_dim:
        found = {"in_proj_weight": [("embed_dim", 3), "embed_dim"]}
    else:
        found = {"q_proj_weight": ["embed_dim", "embed_dim"],
                 "k_proj_weight": ["embed_dim", "kdim"], "v_proj_weight": ["embed_dim", "vdim"]}
    found.update({"in_proj_bias": [("embed_dim", 3)], "bias_k": [1, 1, "embed_dim"],
                  "bias_v": [1, 1, "embed_dim"], "out_proj.weight": ["embed_dim", "embed_dim"],
                  "out_proj.bias": ["embed_dim"]})
    return found, (
        "embed_dim lives in in_proj_weight (3 * embed_dim rows: query, key and "
        "value, embed_dim columns), in_proj_bias and out_proj (both dimensions); a "
        "head is head_dim rows of each of the three blocks."), {}


_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _rnn_rule(m):
    gates, dirs = _GATES.get(m.mode, 1), 2 if m.bidirectional else 1
    out = "proj_size" if getattr(m, "proj_size", 0) else "hidden_size"
    found = {}
    for layer in range(m.num_layers):
        for tail in [f"_l{layer}", f"_l{layer}_reverse"][:dirs]:
            inputs = "input_size" if layer == 0 else (out, dirs)
            found.update({f"weight_ih{tail}": [("hidden_size", gates), inputs],
                          f"weight_hh{tail}": [("hidden_size", gates), out],
                          f"bias_ih{tail}": [("hidden_size", gates)],
                          f"bias_hh{tail}": [("hidden_size", gates)]})
            if out == "proj_size":
                found[f"weight_hr{tail}"] = ["proj_size", "hidden_size"]
    return found, (
        f"hidden_size lives in all four tensors of every layer: the rows of "
        f"weight_ih, weight_hh and both biases ({gates} gate block(s) of "
        "hidden_size each), the columns of weight_hh, and the columns of the "
        "next layer's weight_ih."), {}


def _cell(gates):
    rows = ("hidden_size", gates)
    return ({"weight_ih": [rows, "input_size"], "weight_hh": [rows, "hidden_size"],
             "bias_ih": [rows], "bias_hh": [rows]},
            f"hidden_size lives in the rows of all four tensors ({gates} gate "
            "block(s)) and the columns of weight_hh.")


def _adaptive_rule(m):
    found, cuts = {"head.weight": ["head_size", "in_features"], "head.bias": ["head_size"]}, {}
    for i in range(len(m.tail)):
        size = f"cutoffs[{i + 1}] - cutoffs[{i}]"
        cuts[size] = m.cutoffs[i + 1] - m.cutoffs[i]
        found.update({f"tail.{i}.0.weight": [None, "in_features"],
                      f"tail.{i}.1.weight": [size, None]})
    return found, ("head has shortlist_size + n_clusters rows; each tail cluster's "
                   "last Linear has one row per class of the cluster."), {
        "head_size": m.head_size, "in_features": m.in_features, **cuts}


def _classes_rule(m):
    rows = ("num_classes", math.prod(getattr(m, "out_features", ()) or ()))
    return ({"weight": ["num_classes"], "linear.weight": [rows, None], "linear.bias": [rows]},
            "num_classes lives in the class weights and the rows of linear.", {})


MODULE_SHAPES = {
    nn.Linear: ({"weight": ["out_features", "in_features"], "bias": ["out_features"]},
                "A cut of out_features touches weight rows and bias (and the next "
                "layer's inputs); a cut of in_features touches weight columns."),
    nn.Bilinear: ({"weight": ["out_features", "in1_features", "in2_features"],
                   "bias": ["out_features"]},
                  "A Bilinear's weight is [out_features, in1_features, in2_features]; "
                  "bias follows out_features."),
    nn.modules.conv._ConvNd: _conv_rule,
    nn.modules.batchnorm._NormBase: (
        dict.fromkeys(["weight", "bias", "running_mean", "running_var"], ["num_features"]),
        "A channel of a BatchNorm lives in weight, bias, running_mean and "
        "running_var, and in the layers before and after it."),
    (nn.LayerNorm, nn.RMSNorm): _normalized_rule,
    nn.GroupNorm: ({"weight": ["num_channels"], "bias": ["num_channels"]},
                   "GroupNorm's weight and bias follow num_channels, a multiple of "
                   "num_groups."),
    (nn.Embedding, nn.EmbeddingBag): (
        {"weight": ["num_embeddings", "embedding_dim"]},
        "A tied output layer shares this weight: cut both at once."),
    nn.PReLU: ({"weight": ["num_parameters"]},
               "PReLU has one slope per channel (num_parameters), or one for all."),
    nn.MultiheadAttention: _mha_rule,
    nn.RNNBase: _rnn_rule,
    nn.RNNCell: _cell(1), nn.LSTMCell: _cell(4), nn.GRUCell: _cell(3),
    nn.AdaptiveLogSoftmaxWithLoss: _adaptive_rule,
    getattr(nn, "LinearCrossEntropyLoss", ()): _classes_rule,     # torch 2.13+
}


# --- 06_any_layer_any_node.ipynb, cell 93 ---
# @title Reading each tensor's shape without running a parametrization or a hook
import torch
from torch import nn


def _shape(t):
    """A tensor's shape as a list, None if it has none yet (lazy modules)."""
    if not isinstance(t, torch.Tensor) or isinstance(
            t, nn.parameter.UninitializedTensorMixin):
        return None
    return list(t.shape)


def _stored(module, name):
    """A module's own parameter or buffer, read without any hook or property."""
    if not isinstance(module, nn.Module):
        return None
    if name in module._parameters:
        return module._parameters[name]
    return module._buffers.get(name)


# parametrizations whose output has their input's shape (orthogonal registers
# itself as "unsafe", which lets a parametrization change the shape)
_SAME_SHAPE = {"_Orthogonal", "_SpectralNorm"}


def _rank(tensor, dims):
    return tensor.dim() if isinstance(tensor, torch.Tensor) else len(dims)


def _norm_dims(dims, dim, n):
    """The dims of weight_norm's g: the weight's dim `dim`, 1 elsewhere (dim -1:
    one norm for the whole weight)."""
    if dim == -1 or not dims:
        return [1] * n
    dim = dim % len(dims)
    return [d if i == dim else 1 for i, d in enumerate(dims)]


def _orthogonal_base(p, dims):
    """orthogonal's base: a square of the larger of the weight's last two dims."""
    if len(dims) < 2:
        return dims
    tall = p.shape[-2] >= p.shape[-1]
    return [*dims[:-2], *[dims[-2] if tall else dims[-1]] * 2]


def _views(module, attr, dims, unread):
    """[(stored name, shape, dims)]: the tensors that hold `attr`, read without
    running a parametrization, a weight_norm/spectral_norm hook or a
    torch.nn.utils.prune hook (which keeps `attr`_orig and `attr`_mask) (the name of
    one whose shape cannot be known so is added to `unread`)."""
    owner_path, _, leaf = attr.rpartition(".")
    owner = module
    for part in owner_path.split(".") if owner_path else []:
        owner = owner._modules.get(part) if isinstance(owner, nn.Module) else None
    if not isinstance(owner, nn.Module):
        return []
    prefix = owner_path + "." if owner_path else ""
    plists = owner._modules.get("parametrizations")
    if isinstance(plists, nn.Module) and leaf in plists._modules:
        plist = plists._modules[leaf]
        base = f"{prefix}parametrizations.{leaf}."
        first = plist._modules.get("0")
        g, v = _stored(plist, "original0"), _stored(plist, "original1")
        if type(first).__name__ == "_WeightNorm" and _shape(v) is not None:
            gdims = _norm_dims(dims, first.dim, _rank(g, dims))
            return [(base + "original1", _shape(v), dims),
                    (base + "original0", _shape(g), gdims)]
        original = _stored(plist, "original")
        known = all(type(p).__name__ in _SAME_SHAPE for p in plist._modules.values())
        inverse = any(hasattr(p, "right_inverse") for p in plist._modules.values())
        if _shape(original) is None or (not known and (
                inverse or getattr(plist, "unsafe", False))):
            unread.append(f"{prefix}{leaf}")   # several originals, or a shape it may change
            return []
        found = [(base + "original", _shape(original), dims)]
        for index, p in plist._modules.items():
            if type(p).__name__ == "_Orthogonal" and _stored(p, "base") is not None:
                found.append((f"{base}{index}.base", _shape(_stored(p, "base")),
                              _orthogonal_base(p, dims)))
            if type(p).__name__ == "_SpectralNorm" and len(dims) > 1:
                d = p.dim % len(dims)
                found += [(f"{base}{index}._u", _shape(_stored(p, "_u")), [dims[d]]),
                          (f"{base}{index}._v", _shape(_stored(p, "_v")),
                           [[x for i, x in enumerate(dims) if i != d]])]
        return found
    for hook in owner._forward_pre_hooks.values():
        if getattr(hook, "_tensor_name", None) == leaf:     # torch.nn.utils.prune's
            return [(f"{prefix}{leaf}_orig", _shape(_stored(owner, leaf + "_orig")), dims),
                    (f"{prefix}{leaf}_mask", _shape(_stored(owner, leaf + "_mask")), dims)]
        if getattr(hook, "name", None) != leaf:
            continue
        if type(hook).__name__ == "WeightNorm":
            g = _shape(_stored(owner, leaf + "_g"))
            return [(f"{prefix}{leaf}_v", _shape(_stored(owner, leaf + "_v")), dims),
                    (f"{prefix}{leaf}_g", g, _norm_dims(dims, hook.dim, len(dims) if g is None
                                                        else len(g)))]
        if type(hook).__name__ == "SpectralNorm":
            d = hook.dim % max(len(dims), 1)
            return [(f"{prefix}{leaf}_orig", _shape(_stored(owner, leaf + "_orig")), dims),
                    (f"{prefix}{leaf}_u", _shape(_stored(owner, leaf + "_u")), [dims[d]]),
                    (f"{prefix}{leaf}_v", _shape(_stored(owner, leaf + "_v")),
                     [[x for i, x in enumerate(dims) if i != d]])]
    return [(prefix + leaf, _shape(_stored(owner, leaf)), dims)]


# --- 06_any_layer_any_node.ipynb, cell 94 ---
# @title ShapeProblem, and a module's tensors checked against each other and its settings
from collections import Counter
from typing import NamedTuple


class ShapeProblem(NamedTuple):
    """One tensor of a module that disagrees with the module's other tensors or
    its settings, or (kind "setting") a setting that disagrees with the tensors."""
    module: str          # its name in the model (its type for the model itself)
    tensor: str          # the attribute (weight_hh_l0, weight.grad) or the setting
    setting: str         # what the size should follow, e.g. [4 * hidden_size, ...]
    expected: list
    actual: list
    consistent_cut: str  # what a cut of that setting touches, and what to change
    kind: str = "tensor"  # "tensor", "setting", "link" (between modules), "unchecked"

    def __str__(self):
        if self.kind == "link":
            return f"{self.module} {self.tensor}: {self.consistent_cut}"
        if self.kind == "tensor":
            return (f"{self.module}.{self.tensor}: {self.actual}, expected "
                    f"{self.expected} from {self.setting}. {self.consistent_cut}")
        if self.kind == "setting" and self.expected:
            return (f"{self.module}.{self.tensor} = {self.actual[0]}, but {self.setting} "
                    f"say {self.expected[0]}. {self.consistent_cut}")
        if self.kind == "setting":
            return f"{self.module}.{self.tensor} = {self.actual[0]}: {self.consistent_cut}"
        joint = " " if "->" in self.tensor else "." * bool(self.tensor)
        return f"{self.module}{joint}{self.tensor}: not checked " \
               f"({self.consistent_cut})"


def _size(d, held, actual):
    """The size a dim should have, given the settings' values in `held`."""
    if d is None:
        return actual
    if isinstance(d, int):
        return d
    if isinstance(d, tuple):
        return d[1] * held[d[0]]
    total = 1
    for part in d:
        if part is None:
            return actual
        total *= part if isinstance(part, int) else part[1] * held[part[0]]
    return total


def _formula(dims):
    def one(d):
        if d is None:
            return "any"
        if isinstance(d, int):
            return str(d)
        if isinstance(d, tuple):
            return d[0] if d[1] == 1 else f"{d[1]} * {d[0]}"
        return " * ".join(one(x) for x in d)
    return "[" + ", ".join(one(d) for d in dims) + "]"


def _check_rule(label, settings, tensors, cut):
    """The tensors against each other and the settings: each setting's value is
    what most tensors hold (the setting breaks a tie, and wins against one)."""
    voters = {name: [] for name in settings}       # (tensor, the value it implies)
    for stored, shape, dims in tensors:
        if shape is not None and len(shape) == len(dims):
            for size, d in zip(shape, dims):
                if isinstance(d, tuple) and d[0] in voters and size % d[1] == 0:
                    voters[d[0]].append((stored, size // d[1]))
    held = {}
    for name, value in settings.items():
        votes = Counter(v for _, v in voters[name])
        top = max(votes.values(), default=0)
        best = [v for v, n in votes.items() if n == top]
        held[name] = value if top < 2 or value in best else best[0]
    problems = []
    for stored, shape, dims in tensors:
        if shape is None:
            continue
        expected = [_size(d, held, shape[i] if i < len(shape) else None)
                    for i, d in enumerate(dims)]
        if shape == expected:
            continue
        source, also = _formula(dims), ""
        for name in dict.fromkeys(d[0] for d in dims if isinstance(d, tuple)):
            mine = [v for s, v in voters[name] if s == stored]
            others = [s for s, v in voters[name] if v == held[name] and s != stored]
            if held[name] != settings[name]:
                source += (f" with {name} = {held[name]}, as "
                           f"{', '.join(dict.fromkeys(others))} hold it")
                also += f" Set {name} = {held[name]} too."
            elif mine and mine[0] != held[name]:
                also += (f" If {mine[0]} is meant: " + (
                    f"cut {', '.join(dict.fromkeys(others))} the same way and "
                    if others else "") + f"set {name} = {mine[0]}.")
        problems.append(ShapeProblem(label, stored, source, expected, shape, cut + also))
    for name, value in settings.items():
        if held[name] != value:
            agree = [s for s, v in voters[name] if v == held[name]]
            problems.append(ShapeProblem(
                label, name, ", ".join(dict.fromkeys(agree)), [held[name]], [value],
                f"{len(agree)} of the {len(voters[name])} sizes that follow {name} "
                f"say {held[name]}: set {name} = {held[name]}.", "setting"))
    return problems


# --- 06_any_layer_any_node.ipynb, cell 95 ---
# @title Links between modules: each module's output width against the next one's input
import operator

import torch
import torch.nn.functional as F
from torch import nn

# modules whose output has their input's widths (activations but GLU and
# attention, dropout, identity); pooling keeps the channels (dim 1) only
_SAME_WIDTH = (nn.Identity, nn.modules.dropout._DropoutNd) + tuple(
    c for c in vars(nn.modules.activation).values() if isinstance(c, type)
    and issubclass(c, nn.Module) and c.__module__ == nn.modules.activation.__name__
    and c not in (nn.GLU, nn.MultiheadAttention))
_POOLS = (nn.modules.pooling._MaxPoolNd, nn.modules.pooling._AvgPoolNd,
          nn.modules.pooling._AdaptiveAvgPoolNd, nn.modules.pooling._AdaptiveMaxPoolNd)
# functions and methods of one tensor that keep its widths (fx's view of them)
_SAME_WIDTH_CALLS = {torch.relu, torch.tanh, torch.sigmoid, F.relu, F.gelu, F.silu,
                     F.leaky_relu, F.elu, F.dropout, torch.nn.functional.softmax,
                     operator.add, operator.mul, operator.sub, torch.add, torch.mul,
                     "relu", "tanh", "sigmoid", "contiguous", "softmax", "add", "mul"}


def _ends(m):
    """(input width, output width, axis) of a module, read from its tensors
    where it has them (the forward computes with the tensors, not the
    settings): axis "last" (a Linear's features) or "channel" (dim 1);
    None for a module whose widths it does not know."""
    weight = _stored(m, "weight")
    weight = _stored(m, "weight_orig") if weight is None else weight   # prune's
    shape = _shape(weight) or []
    if isinstance(m, nn.Linear):
        return (*(shape[::-1] if len(shape) == 2 else [m.in_features, m.out_features]), "last")
    if isinstance(m, nn.modules.conv._ConvNd) and len(shape) > 2:
        a, b = shape[0], shape[1] * m.groups
        return (a, b, "channel") if m.transposed else (b, a, "channel")
    if isinstance(m, nn.modules.batchnorm._NormBase):
        held = _shape(_stored(m, "running_mean")) or shape or [m.num_features]
        return held[0], held[0], "either"      # BatchNorm1d reads (N, C): C is last
    if isinstance(m, nn.GroupNorm):
        return m.num_channels, m.num_channels, "channel"
    if isinstance(m, (nn.LayerNorm, getattr(nn, "RMSNorm", nn.LayerNorm))):
        last = shape[-1] if shape else m.normalized_shape[-1]
        return last, last, "last"
    if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and len(shape) == 2:
        return None, shape[1], "last"
    return None


def _same_axis(a, b):
    return a == b or "either" in (a, b)


def _link_problem(label, producer, consumer, through):
    """A ShapeProblem if `producer` (name, out width, axis) does not feed
    `consumer` (name, in width, axis) the width it reads; None if it does."""
    (p_name, out, p_axis), (c_name, width, c_axis) = producer, consumer
    if not _same_axis(p_axis, c_axis):
        return ShapeProblem(label, f"{p_name} -> {c_name}", "", [], [],
                            f"{p_name} writes its {p_axis} dim and {c_name} reads its "
                            f"{c_axis} dim: the reshape between is not read", "unchecked")
    if out == width:
        return None
    via = f" (through {', '.join(through)})" if through else ""
    return ShapeProblem(
        label, f"{p_name} -> {c_name}", f"the output of {p_name}{via}", [out], [width],
        f"{p_name} gives {out} features and {c_name} reads {width}: one side was cut, "
        f"resized or built without the other. Make both sides agree (cut both, or "
        f"neither).", "link")


# --- 06_any_layer_any_node.ipynb, cell 96 ---
# @title Following the data: along a Sequential, along a traced forward
import torch
import torch.fx
from torch import nn

def _chain(module, prefix=""):
    """A Sequential's modules in the order its forward runs them, nested
    Sequentials opened."""
    for name, child in module._modules.items():
        if child is None:
            continue
        if isinstance(child, nn.Sequential):
            yield from _chain(child, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", child


def _sequential_links(label, module, prefix, inner):
    """Problems along a Sequential: each producer against the next consumer."""
    problems, producer, through, blocker = [], None, [], None
    for name, child in _chain(module, prefix):
        ends = _ends(child)
        if ends is not None:
            width, out, axis = ends
            if blocker is not None and width is not None:
                problems.append(ShapeProblem(
                    label, f"{producer[0] if producer else 'the input'} -> {name}", "",
                    [], [], f"{blocker} sits between them, and how it changes the "
                    "width is not read", "unchecked"))
            elif producer is not None and width is not None:
                problem = _link_problem(label, producer, (name, width, axis), through)
                problems += [problem] if problem else []
            producer, through, blocker = (name, out, axis), [], None
        elif isinstance(child, _SAME_WIDTH) or (
                isinstance(child, _POOLS) and producer and producer[2] != "last"):
            through.append(name)
        else:
            if producer is not None and blocker is None:
                blocker = f"{name} ({type(child).__name__})"
            if type(child).__module__.split(".")[0] != "torch" and child._modules:
                inner.append((name, child))
    return problems


def _traced_links(label, module, prefix):
    """Problems along the graph torch.fx traces through a module's forward
    (symbolically: no tensor is computed); raises if it cannot trace."""
    graph = torch.fx.Tracer().trace(module)
    problems = []
    for node in graph.nodes:
        if node.op != "call_module" or _ends(module.get_submodule(node.target)) is None:
            continue
        width, _, axis = _ends(module.get_submodule(node.target))
        if width is None:
            continue
        source, through = node.args[0] if node.args else None, []
        while isinstance(source, torch.fx.Node):
            if source.op == "call_module":
                held = module.get_submodule(source.target)
                if _ends(held) is not None:
                    _, out, p_axis = _ends(held)
                    problem = _link_problem(label, (prefix + source.target, out, p_axis),
                                            (prefix + node.target, width, axis), through)
                    problems += [problem] if problem else []
                    break
                if not isinstance(held, _SAME_WIDTH + _POOLS):
                    source = f"{source.target} ({type(held).__name__})"
                    break
                through.append(prefix + source.target)
            elif source.op in ("call_function", "call_method") and (
                    source.target in _SAME_WIDTH_CALLS):
                through.append(getattr(source.target, "__name__", str(source.target)))
            elif source.op == "placeholder":
                break
            else:
                source = f"{getattr(source.target, '__name__', source.target)}"
                break
            source = next((a for a in source.args if isinstance(a, torch.fx.Node)), None)
        if isinstance(source, str):
            problems.append(ShapeProblem(
                label, f"-> {prefix}{node.target}", "", [], [],
                f"{source} comes before it, and how it changes the width is not read",
                "unchecked"))
    return problems


def _composite_links(label, model):
    """torch.nn's own modules whose forward wires two or more modules of known
    widths (a TransformerEncoderLayer's linear1 and linear2): their forward is
    not traced, so their links are reported as not checked."""
    found = []
    containers = (nn.Sequential, nn.ModuleList, nn.ModuleDict)
    for path, module in model.named_modules():
        if type(module).__module__.split(".")[0] != "torch" or isinstance(module, containers):
            continue
        known = [n for n, m in module.named_children() if _ends(m) is not None]
        if len(known) > 1:
            found.append(ShapeProblem(
                label, path, "", [], [], f"the links between {', '.join(known)}: torch.nn's "
                "own forward is not traced, so each is checked alone", "unchecked"))
    return found


def link_problems(model, name=""):
    """Each module's output width against the input width of the module that
    reads it next: along a Sequential in order, and along the forward of a
    module of your own as torch.fx traces it (symbolically). A link it cannot
    follow is a problem of kind "unchecked", never an agreement."""
    label = name or type(model).__name__
    problems, todo = _composite_links(label, model), [("", model)]
    while todo:
        name, module = todo.pop(0)
        prefix = f"{name}." if name else ""
        inner = []
        if isinstance(module, nn.Sequential):
            problems += _sequential_links(label, module, prefix, inner)
            todo += [(prefix + n, m) for n, m in inner]
        elif isinstance(module, (nn.ModuleDict, nn.ModuleList)) and not name:
            known = [n for n, m in module.named_children() if _ends(m) is not None]
            if len(known) > 1:
                problems.append(ShapeProblem(
                    label, "", "", [], [], f"a {type(module).__name__} has no forward: "
                    f"the order in which your code runs {', '.join(known)} is not "
                    "read", "unchecked"))
            todo += [(prefix + n, m) for n, m in module.named_children()]
        elif type(module).__module__.split(".")[0] != "torch" and module._modules:
            try:
                problems += _traced_links(label, module, prefix)
            except Exception as failure:        # control flow on tensors, say
                reason = str(failure).strip().splitlines()[0][:100] if str(failure) else ""
                problems.append(ShapeProblem(
                    label, name, "", [], [],
                    "the links between its modules: torch.fx could not trace its "
                    f"forward ({type(failure).__name__}: {reason})", "unchecked"))
                todo += [(prefix + n, m) for n, m in module.named_children()]
    return problems


# --- 06_any_layer_any_node.ipynb, cell 97 ---
# @title check_module_shapes: every module's tensors against each other and its settings
from torch import nn


def _rule(m):
    """(settings, tensors [(attribute, dims)], cut) for the module by its class's
    entry in MODULE_SHAPES (each dim a (setting, factor), an int or None); None
    for a class that has none."""
    rule = next((r for cls, r in MODULE_SHAPES.items() if isinstance(m, cls)), None)
    if rule is None:
        return None
    found, cut, computed = rule(m) if callable(rule) else (*rule, {})
    tensors = [(attr, [(d, 1) if isinstance(d, str) else d for d in dims])
               for attr, dims in found.items()]
    names = [d[0] for _, dims in tensors for d in dims if isinstance(d, tuple)]
    return {**computed, **{n: getattr(m, n) for n in names if n not in computed}}, tensors, cut


def _divisor_problems(label, m, weight_shape):
    """groups (a Conv), num_groups (GroupNorm), num_heads (attention) must divide
    the sizes they split: if not, the setting is named with what the tensors say."""
    if isinstance(m, nn.modules.conv._ConvNd):
        g, cin, cout = m.groups, m.in_channels, m.out_channels
        if g > 0 and cin % g == 0 and cout % g == 0:
            return []
        total, other = (cout, cin) if m.transposed else (cin, cout)
        per = weight_shape[1] if weight_shape and len(weight_shape) > 1 else 0
        fits = per > 0 and total % per == 0 and other % (total // per) == 0
        name = "out_channels" if m.transposed else "in_channels"
        return [ShapeProblem(
            label, "groups", f"the weight {weight_shape} and {name} {total}",
            [total // per] if fits else [], [g],
            f"in_channels {cin} and out_channels {cout} must both be multiples of "
            "groups" + (f": set groups = {total // per} (a depthwise conv has groups "
                        "= in_channels = out_channels)." if fits else
                        ", and no groups fits the weight: cut whole groups."),
            "setting")]
    for cls, whole, parts in ((nn.GroupNorm, "num_channels", "num_groups"),
                              (nn.MultiheadAttention, "embed_dim", "num_heads")):
        if isinstance(m, cls) and getattr(m, parts) and \
                getattr(m, whole) % getattr(m, parts):
            return [ShapeProblem(
                label, parts, whole, [], [getattr(m, parts)],
                f"{whole} {getattr(m, whole)} is not a multiple of {parts} "
                f"{getattr(m, parts)}: cut whole groups (or heads), or change "
                f"{parts}.", "setting")]
    return []


def _module_problems(label, module):
    problems = []
    rule = _rule(module)
    if rule is not None:
        settings, found, cut = rule
        unread = []
        tensors = [view for attr, dims in found
                   for view in _views(module, attr, dims, unread)]
        problems += [ShapeProblem(
            label, attr, "", [], [],
            f"{attr} is parametrized, and its shape cannot be read without running "
            "the parametrization", "unchecked") for attr in unread]
        problems += _check_rule(label, settings, tensors, cut)
        weight = next((shape for name, shape, _ in tensors
                       if name.split(".")[-1] in ("weight", "original", "weight_orig",
                                                  "weight_v", "original1")), None)
        problems += _divisor_problems(label, module, weight)
    if isinstance(module, nn.RNNBase):
        flat = getattr(module, "_flat_weights", None) or []
        names = getattr(module, "_flat_weights_names", [])
        for attr, held in zip(names, flat):
            param = _stored(module, attr)
            if held is not None and param is not None and held is not param:
                problems.append(ShapeProblem(
                    label, attr, "the tensor the RNN's kernel reads (_flat_weights)",
                    _shape(param), _shape(held),
                    "The RNN reads its weights from _flat_weights: assign new "
                    "parameters with setattr so that it updates the list."))
    for attr, param in module._parameters.items():
        shape = _shape(param)
        grad = getattr(param, "grad", None) if shape is not None else None
        if grad is not None and list(grad.shape) != shape:
            problems.append(ShapeProblem(
                label, f"{attr}.grad", "the parameter's shape", shape, list(grad.shape),
                "An old .grad of the old shape fails the next backward ('The size "
                "of tensor a ... must match'): slice it the same way, or set it to "
                "None."))
    return problems


def check_module_shapes(model, name=""):
    """Every module's parameters and buffers against each other and its settings,
    every parameter's .grad against the parameter, and each module's output
    width against the next module's input (link_problems): a list of
    ShapeProblem, [] if all agree. Reads only (no forward, no parametrization,
    no hook runs); never raises on a module: what it cannot read or follow is
    a problem of kind "unchecked", never an agreement. `name`, if given, is
    the model's name in your code, the start of every module's name."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    problems = []
    try:
        modules = list(model.named_modules())
    except Exception as failure:                # a module whose listing fails
        return [ShapeProblem(type(model).__name__, "", "", [], [],
                             f"{type(failure).__name__}: {failure}", "unchecked")]
    for path, module in modules:
        label = ".".join(filter(None, [name, path])) or type(module).__name__
        try:
            problems += _module_problems(label, module)
        except Exception as failure:            # a module no rule foresaw
            problems.append(ShapeProblem(label, "", "", [], [],
                                         f"{type(failure).__name__}: {failure}",
                                         "unchecked"))
    try:
        problems += link_problems(model, name)
    except Exception as failure:                # a model no rule foresaw
        problems.append(ShapeProblem(type(model).__name__, "", "", [], [],
                                     f"the links between modules: {type(failure).__name__}:"
                                     f" {failure}", "unchecked"))
    return problems


def assert_module_shapes(model):
    """check_module_shapes, as a ValueError naming every problem; run it before
    a forward pass that could crash on inconsistent tensors."""
    problems = check_module_shapes(model)
    if problems:
        raise ValueError("module tensors disagree with their settings:\n"
                         + "\n".join(f"- {p}" for p in problems))


# --- 06_any_layer_any_node.ipynb, cell 131 ---
# @title What the doctor reads in the frames: the tensors backward() ran on, records, functional_call's tensors, a view's settings
import math
import os
import sys
import traceback

import torch
from torch import nn

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _raised_at(error, frame):
    """The line `frame` was running when the error left it: the traceback's
    (the frame's own f_lineno may have moved on, through a finally block)."""
    tb, line = getattr(error, "__traceback__", None), frame.f_lineno
    while tb is not None:
        if tb.tb_frame is frame:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _frames(error):
    """[(frame, is it torch's own?)] of the error's traceback, outermost first:
    the frames that have returned only. A frame still running is left out:
    before Python 3.13, reading its locals leaves a copy of them on the
    frame, which would keep your objects alive."""
    running, frame = set(), sys._getframe()
    while frame is not None:
        running.add(id(frame))
        frame = frame.f_back
    found, tb = [], getattr(error, "__traceback__", None)
    while tb is not None:
        if id(tb.tb_frame) not in running:
            found.append((tb.tb_frame,
                          tb.tb_frame.f_code.co_filename.startswith(_TORCH_DIR)))
        tb = tb.tb_next
    return found


def _backward_outputs(error):
    """The tensors the failing backward() (or autograd.grad) ran on, read from
    torch's own frames: _engine_run_backward's t_outputs, or Tensor.backward's self."""
    for frame, own in _frames(error):
        if not own:
            continue
        names = frame.f_locals
        if frame.f_code.co_name == "_engine_run_backward":
            held = names.get("t_outputs")
            return [t for t in (held or ()) if isinstance(t, torch.Tensor)]
        if frame.f_code.co_name == "backward" and isinstance(names.get("self"), torch.Tensor):
            return [names["self"]]
    return []


def _changed_records(outputs, names):
    """Lines naming each parameter whose accumulator, in the graph of
    `outputs`, recorded another shape than the parameter has now: it was cut
    after that graph's forward."""
    lines = []
    for node in _nodes(outputs):
        leaf = getattr(node, "variable", None)
        recorded = _recorded(node, 0) if leaf is not None else None
        if recorded is not None and recorded != list(leaf.shape):
            name = names.get(id(leaf), f"a leaf of shape {list(leaf.shape)}")
            lines.append(f"the graph recorded {name} as {recorded}; it is "
                         f"{list(leaf.shape)} now: the graph is older than the cut (or its "
                         "forward used a copy made before it)")
    return lines


def _functional_params(error):
    """Lines naming each tensor handed to torch.func.functional_call whose
    shape is not its module's (a dict made before a cut)."""
    lines = []
    for frame, own in _frames(error):
        if not own or frame.f_code.co_name != "_functional_call":
            continue
        module, given = frame.f_locals.get("module"), frame.f_locals.get("parameters_and_buffers")
        if not isinstance(module, nn.Module) or not isinstance(given, dict):
            continue
        own_tensors = dict(module.named_parameters())
        own_tensors.update(dict(module.named_buffers()))
        for key, value in given.items():
            mine = own_tensors.get(key)
            if isinstance(value, torch.Tensor) and isinstance(mine, torch.Tensor) and \
                    value.shape != mine.shape:
                lines.append(f"functional_call was given {key!r} of {list(value.shape)}; the "
                             f"module's {key} is {list(mine.shape)} now: a dict made before "
                             "the cut")
    return lines


def _view_settings(error, shape, size):
    """Lines naming the int settings of the module whose forward asked for a
    view of `shape` on `size` elements, when a setting is one of its sizes."""
    frames = [frame for frame, _ in _frames(error)]
    module = next((f.f_locals.get("self") for f in reversed(frames)
                   if isinstance(f.f_locals.get("self"), nn.Module)), None)
    if module is None or not all(isinstance(n, int) for n in shape):
        return []
    lines = []
    for attr, value in vars(module).items():
        if attr.startswith("_") or type(value) is not int or value < 2 or value not in shape:
            continue
        others = math.prod(shape) // value
        fits = size % others == 0 and -1 not in shape
        lines.append(f"{type(module).__name__}.{attr} = {value} is in the view's shape {shape}"
                     + (f": with the {size} elements the input has, that size would be "
                        f"{size // others}, if the other sizes are right" if fits else ""))
    return lines


# --- 06_any_layer_any_node.ipynb, cell 132 ---
# @title More that the doctor reads: the traceback's text, the module that raised, hooks, average copies
import traceback

import torch
from torch import nn

def _error_text(error):
    """The error as Python prints it, traceback and all: what read_message reads."""
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))


def _failing_module(error):
    """The module whose code raised, and the function: the innermost returned
    frame whose `self` is a module ("forward" in torch's frames that call it;
    (None, "") if there is none)."""
    return next(((f.f_locals.get("self"), "forward" if own else f.f_code.co_name)
                 for f, own in reversed(_frames(error))
                 if isinstance(f.f_locals.get("self"), nn.Module)), (None, ""))


def _sized_tensors(module, label, sizes, function="forward"):
    """Lines naming the tensors of `module` with a dimension of one of `sizes`
    (the two sizes a failed operation combined): a lead, not a verdict (the
    operation may have paired two tensors that were never meant to meet)."""
    held = [(n, t) for n, t in [*module.named_parameters(), *module.named_buffers()]
            if isinstance(t, torch.Tensor) and any(s in t.shape for s in sizes)]
    if not held:
        return []
    return [f"in {label} ({type(module).__name__}), whose {function} raised, the tensors of "
            f"size {' or '.join(map(str, sizes))}: " + "; ".join(
                f"{n} is {list(t.shape)}" for n, t in held[:8])
            + ": if the operation combined two of these, one was cut or resized without "
              "the other, or they were never meant to meet"]


def _captured(function):
    """Tensors a hook holds or reads: in its closure, a partial's arguments,
    its defaults, and the dicts of module globals it names (the entry of a
    key it holds, such as a parameter's name, if there is one)."""
    found = []
    for cell in getattr(function, "__closure__", None) or ():
        try:
            found.append(cell.cell_contents)
        except ValueError:                    # an empty cell
            pass
    found += list(getattr(function, "args", ()) or ()) + list(
        (getattr(function, "keywords", None) or {}).values())
    found += list(getattr(function, "__defaults__", None) or ())
    keys = [k for k in found if isinstance(k, str)]
    code, globals_ = getattr(function, "__code__", None), getattr(function, "__globals__", {})
    for name in getattr(code, "co_names", ()):
        table = globals_.get(name)
        if isinstance(table, dict):
            found += [table[k] for k in keys if k in table] or list(table.values())
    return [t for t in found if isinstance(t, torch.Tensor)]


def _hook_findings(names_of):
    """Lines naming each hook on a parameter that holds a tensor of another
    shape than the parameter (a mask of the old shape)."""
    lines = []
    for name, param in names_of:
        for hook in (getattr(param, "_backward_hooks", None) or {}).values():
            for held in _captured(hook):
                if held.dim() == param.dim() and held.shape != param.shape and any(
                        a == b for a, b in zip(held.shape, param.shape)):
                    lines.append(f"{name} has a hook ({getattr(hook, '__name__', 'a hook')})"
                                 f" that holds a tensor of {list(held.shape)}; {name} is "
                                 f"{list(param.shape)} now")
    return lines


def _average_findings(roots):
    """Lines on each average copy (a module whose `.module` has the modules of
    another of your models: AveragedModel, an EMA): a tensor of another shape
    (same name), or other names or another order (which torch.nn.utils.prune
    makes: weight_orig after bias), so that pairing by position pairs others."""
    lines = []
    for label, average in roots:
        inner = getattr(average, "module", None)
        if not isinstance(inner, nn.Module) or inner is average:
            continue
        layout = [n for n, _ in inner.named_modules()]
        for other_label, other in roots:
            if other is average or [n for n, _ in other.named_modules()] != layout:
                continue
            mine, theirs = dict(inner.named_parameters()), dict(other.named_parameters())
            lines += [f"{label}.module.{name} is {list(mine[name].shape)}; {other_label}."
                      f"{name} is {list(param.shape)}: the average copy was made before the cut"
                      for name, param in theirs.items()
                      if name in mine and mine[name].shape != param.shape]
            if list(mine) != list(theirs):
                only = lambda a, b: ", ".join([n for n in a if n not in b][:4]) or "none"
                lines.append(f"{label}.module and {other_label} list other parameters, or in "
                             f"another order ({other_label} has {only(theirs, mine)} where the "
                             f"copy has {only(mine, theirs)}): an update that pairs them by "
                             "position pairs tensors that do not belong together")
    return lines


# --- 06_any_layer_any_node.ipynb, cell 133 ---
# @title And more: graphs freed by an earlier backward, prune's computed weights, frozen and mixed tensors
import torch
from torch import nn
from torch.nn.utils import prune      # not imported by torch itself


def _nodes(outputs, limit=20_000):
    """The autograd nodes behind `outputs`, each once (at most `limit`)."""
    seen, found = set(), []
    stack = [t.grad_fn for t in outputs if isinstance(t, torch.Tensor)]
    while stack and len(found) < limit:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        found.append(node)
        stack.extend(child for child, _ in node.next_functions)
    return found


def _saved(node):
    """What `node` saved for backward: "freed" (by an earlier backward: reading
    it raises, and only asked after such an error), "kept", or "" (nothing)."""
    state = ""
    for attribute in dir(node):
        if not attribute.startswith("_saved_"):
            continue
        try:
            value = getattr(node, attribute)
        except RuntimeError as error:
            if "freed" in str(error):
                return "freed"
            continue
        except Exception:                          # noqa: BLE001 (not a tensor)
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        state = "kept" if any(isinstance(v, torch.Tensor) for v in values) else state
    return state


def _held_graphs(outputs, roots):
    """Lines on a second backward through freed nodes: each tensor with a graph
    that a module keeps as an attribute (it outlives the step: a weight computed
    once), whose graph holds a freed node; else what the freed nodes say."""
    states = {}
    saved = lambda node: states.setdefault(id(node), _saved(node))
    freed = [node for node in _nodes(outputs) if saved(node) == "freed"]
    if not freed:
        return []
    kept = [(".".join(filter(None, [root_name, path, key])), value)
            for root_name, root in roots for path, module in root.named_modules()
            for key, value in vars(module).items()
            if isinstance(value, torch.Tensor) and value.grad_fn is not None]
    # this backward frees what it goes through, newest first (by sequence number):
    # a freed node older than every node it has not reached yet was freed before
    # it; if it reached them all, the oldest freed node is the one it stopped at
    waiting = [node._sequence_nr() for node in _nodes(outputs) if saved(node) == "kept"]
    oldest = min(node._sequence_nr() for node in freed)
    older = lambda node: (node._sequence_nr() < min(waiting) if waiting
                          else node._sequence_nr() == oldest)
    lines = [f"{label} is a tensor with a graph ({type(tensor.grad_fn).__name__}) that its "
             "module keeps from step to step, and an earlier backward freed that graph"
             for label, tensor in kept
             if any(saved(node) == "freed" and older(node)
                    for node in _nodes([tensor], limit=2_000))]
    return lines or [f"this backward reached {len(freed)} node(s) whose saved tensors were "
                     f"freed ({type(freed[0]).__name__}): a tensor made in an earlier step and "
                     "used again (a hidden state not detached between batches), or a second "
                     "backward() through one graph"]


def _reparametrized(roots):
    """Lines naming each tensor that torch.nn.utils.prune computes at each
    forward (a tensor with a graph, not a Parameter)."""
    return [f"{'.'.join(filter(None, [root_name, path]))}.{hook._tensor_name} is computed by "
            f"torch.nn.utils.prune from {hook._tensor_name}_orig and {hook._tensor_name}_mask "
            f"(a tensor with a graph, not a Parameter; the Parameter is "
            f"{hook._tensor_name}_orig)"
            for root_name, root in roots for path, module in root.named_modules()
            for hook in module._forward_pre_hooks.values()
            if isinstance(hook, prune.BasePruningMethod)]


def _frozen(roots):
    """Lines naming the parameters that do not require grad, per model."""
    lines = []
    for root_name, root in roots:
        frozen = [n for n, p in root.named_parameters() if not p.requires_grad]
        if frozen:
            lines.append(f"{len(frozen)} parameter(s) of {root_name} do not require grad: "
                         + ", ".join(frozen[:6]) + (", ..." if len(frozen) > 6 else ""))
    return lines


def _mixed(error, module, label):
    """A line if the floating tensors of `module`, and those its raising frame
    was given, differ in dtype or device."""
    given = next((f.f_locals for f, _ in reversed(_frames(error))
                  if f.f_locals.get("self") is module), {})
    held = [(n, t) for n, t in [*given.items(), *module.named_parameters(),
                                *module.named_buffers()]
            if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if len({(t.dtype, t.device) for _, t in held}) < 2:
        return []
    return [f"{label} ({type(module).__name__}) mixes dtypes or devices: " + "; ".join(
        f"{n} is {str(t.dtype).removeprefix('torch.')} on {t.device}" for n, t in held[:8])]


# --- 06_any_layer_any_node.ipynb, cell 134 ---
# @title And last: a checkpoint against the model it was loading into, and models that should match
import math

import torch
from torch import nn


def _checkpoint_findings(error):
    """Lines comparing the state dict a failed load_state_dict was given with
    the module it was loading into (read from that frame): names that differ
    only by a wrapper's 'module.' level or by prune's _orig and _mask, and
    shapes that differ, with which side is larger. And the fix they point to."""
    frame = next((f for f, _ in reversed(_frames(error)) if f.f_code.co_name == "load_state_dict"
                  and isinstance(f.f_locals.get("self"), nn.Module)
                  and hasattr(f.f_locals.get("state_dict"), "keys")), None)
    if frame is None:
        return [], ""
    label = type(frame.f_locals["self"]).__name__
    mine, theirs = frame.f_locals["self"].state_dict(), frame.f_locals["state_dict"]
    missing, extra = [k for k in mine if k not in theirs], [k for k in theirs if k not in mine]
    unwrap = lambda key: ".".join(p for p in key.split(".") if p != "module")
    unprune = lambda key: None if key.endswith("_mask") else key.removesuffix("_orig")
    lines, fix = [], ""
    if missing or extra:
        lines.append(f"the checkpoint has {', '.join(extra[:3]) or 'no key the model lacks'} "
                     f"where {label} has {', '.join(missing[:3]) or 'no key the checkpoint lacks'}")
        if {unwrap(k) for k in mine} == {unwrap(k) for k in theirs}:
            fix = ("the names differ only by a wrapper's 'module.' level (DataParallel, "
                   "DistributedDataParallel): load into the same wrapping as was saved, or "
                   "rename the keys")
        elif {unprune(k) for k in mine} - {None} == {unprune(k) for k in theirs} - {None}:
            fix = ("one side was saved under torch.nn.utils.prune (weight_orig and weight_mask): "
                   "call prune.remove before saving, or apply the same pruning before loading")
    sized = [(k, list(theirs[k].shape), list(mine[k].shape)) for k in mine
             if k in theirs and hasattr(theirs[k], "shape") and theirs[k].shape != mine[k].shape]
    if sized:
        smaller = sum(math.prod(a) < math.prod(b) for _, a, b in sized)
        lines.append(f"{len(sized)} tensor(s) of other shapes: " + "; ".join(
            f"{k} is {a} in the checkpoint, {b} in {label}" for k, a, b in sized[:3]))
        fix = fix or ("the checkpoint's tensors are " + (
            "smaller: a pruned checkpoint into a model of the old widths; build the model "
            "at the checkpoint's widths (saved beside it) before loading" if smaller == len(sized)
            else "larger: a checkpoint of other widths (unpruned, or another head) into a "
            "pruned or resized model; load before pruning, or leave out (or adapt) those "
            "tensors" if smaller == 0 else "of other widths, some larger, some smaller: "
            "a checkpoint of another configuration; build the model it was saved from"))
    return lines, fix


def _siblings(roots):
    """Lines naming the parameters whose shapes differ between two of your models
    that have the same modules (ensemble members, a teacher and its student)."""
    lines, layouts = [], [(label, root, [n for n, _ in root.named_modules()])
                          for label, root in roots]
    for i, (label, root, layout) in enumerate(layouts):
        for other_label, other, other_layout in layouts[i + 1:]:
            if layout != other_layout or len(layout) < 2:
                continue
            mine, theirs = dict(root.named_parameters()), dict(other.named_parameters())
            differ = [n for n in mine if n in theirs and mine[n].shape != theirs[n].shape]
            if differ:
                lines.append(f"{label} and {other_label} have the same modules, but not the same "
                             "shapes: " + "; ".join(f"{n} is {list(mine[n].shape)} and "
                                                    f"{list(theirs[n].shape)}" for n in differ[:3]))
    return lines[:4]


def _nonfinite(roots):
    """Lines naming the parameters, and the gradients, that hold NaN or inf."""
    found = [f"{'.'.join(filter(None, [label, name]))}{suffix} holds NaN or inf"
             for label, root in roots for name, p in root.named_parameters()
             for suffix, t in (("", p), (".grad", p.grad))
             if t is not None and t.is_floating_point() and not torch.isfinite(t).all()]
    return found[:6] + ([f"... and {len(found) - 6} more"] if len(found) > 6 else [])


# --- 06_any_layer_any_node.ipynb, cell 135 ---
# @title The checkup: what the doctor gathers from your frames and namespace
import os
import sys
import types
from typing import NamedTuple

import torch
from torch import nn

# what to read for each cause, in this book
READ = {"stale accumulator": "chapter 3, What holds the old shape; chapter 4, Every way out",
        "hook": "chapter 6, What else holds the old parameters? (hooks on a parameter)",
        "average copy": "chapter 6, What else holds the old parameters? (an EMA copy)",
        "old grad": "chapter 6, Not about shapes, or not from backward",
        "recorded before the cut": "chapter 6, Not about shapes, or not from backward",
        "kept tensor": "chapter 6, Ties, caches and masks",
        "custom autograd.Function": "chapter 6, A helper that says which tensor, and why",
        "reused non-leaf": "chapter 6, Ties, caches and masks",
        "mask changed": "chapter 6, Ties, caches and masks",
        "forward error": "chapter 6, Not about shapes, or not from backward",
        "optimizer state": "chapter 4, Every way out: The optimizer trap",
        "prune reparametrization": "chapter 6, Saving and loading a pruned model",
        "state dict": "chapter 6, Saving and loading a pruned model"}
# the doctor's own texts: when prune computes the weight, and when nothing decides
DOCTOR_FIXES = {
    "prune reparametrization": (
        "under torch.nn.utils.prune a module's weight is computed at each forward "
        "(weight_orig * weight_mask), a tensor with a graph and not a Parameter: give "
        "weight_orig to an optimizer (or model.parameters()); to copy the model, run a "
        "forward under torch.no_grad() first (the weight is then made without a graph), "
        "or call prune.remove(module, 'weight') when the pruning is done"),
    "average order": (
        "the averaged copy and the model do not hold the same parameters in the same "
        "order (under torch.nn.utils.prune, weight_orig comes after bias): pair their "
        "tensors by name, or prune the copy the same way"),
    "unknown": (
        "no cause this book names fits what was seen. The general method: find the "
        "operation the message names, the tensors it was given (shapes, dtypes, devices) "
        "and where each was made; the lines above say what was checked")}


class Checkup(NamedTuple):
    """What the doctor read and concluded: text only, no object of yours kept."""
    message: str         # the error's first line
    raised_in: str       # the innermost frame of the traceback, and your module there
    cause: str           # a key of FIXES ("unknown" when the evidence does not decide)
    findings: tuple      # what it saw, each naming where (variable, parameter, node)
    fix: str
    read: str            # the section of the book to read
    looked_at: tuple     # what it examined
    not_seen: tuple      # what it could not see

    def __str__(self):
        lines = [f"pruning doctor: {self.message}"]
        lines += [f"  raised in: {self.raised_in}"] if self.raised_in else []
        lines += [f"  seen: {line}" for line in self.findings]
        lines += [f"  cause: {self.cause}", f"  fix: {self.fix}"]
        lines += [f"  read: {self.read}"] if self.read else []
        lines += [f"  looked at: {'; '.join(self.looked_at)}"]
        lines += [f"  not seen: {line}" for line in self.not_seen]
        return "\n".join(lines)


def _scopes(error, namespace):
    """[(where, {name: value})]: the namespace given (a notebook's globals(),
    whose names win), then the locals of your frames that have returned,
    innermost first, then the tensors the failing backward() ran on."""
    scopes = [(f"{frame.f_code.co_name}'s frame", dict(frame.f_locals))
              for frame, own in reversed(_frames(error)) if not own
              and frame.f_code.co_name != "<module>"]
    ran_on = {f"output{f'[{i}]' if i else ''}": t
              for i, t in enumerate(_backward_outputs(error))}
    return [("your namespace", dict(namespace or {}))] + scopes + [
        ("the tensor backward() was called on", ran_on)]


def _items(value, name):
    """(name, object) for a value and, one level down, a list's or dict's items."""
    yield name, value
    if isinstance(value, (list, tuple)) and not isinstance(value, torch.Size):
        yield from ((f"{name}[{i}]", v) for i, v in enumerate(value[:1000]))
    elif isinstance(value, dict):
        yield from ((f"{name}[{k!r}]", v) for k, v in list(value.items())[:1000])


def _unreadable(module):
    """Why the module cannot be read ("" if it can): a copy that failed
    halfway has no _modules, a class of yours may raise."""
    try:
        return "" if all(isinstance(m, nn.Module) for m in module.modules()) else "not modules"
    except Exception as error:                   # noqa: BLE001
        return f"{type(error).__name__}: {error}"


def _gather(scopes):
    """(tensors with a graph, root modules, optimizers) as [(name, object)],
    each object once, by the first name it has; and lines on the modules that
    could not be read."""
    seen, tensors, modules, optimizers, unreadable = set(), [], [], [], []
    named = [(where, name, value) for where, names in scopes for name, value in names.items()
             if not name.startswith("_") and not isinstance(value, types.ModuleType)]
    for depth in (0, 1):                 # names first, then the items of lists and dicts
        for where, name, value in named:
            for label, obj in list(_items(value, name))[depth:] if depth else [(name, value)]:
                if id(obj) in seen:
                    continue
                if isinstance(obj, torch.Tensor) and obj.grad_fn is not None:
                    tensors.append((f"{label} ({where})", obj))
                elif isinstance(obj, nn.Module) and _unreadable(obj):
                    unreadable.append(f"{label}: a module that could not be read "
                                      f"({_unreadable(obj)})")
                elif isinstance(obj, nn.Module):
                    if label in {n for n, _ in modules}:      # another object of that name
                        label = f"{label} ({where.removesuffix(chr(39) + 's frame')})"
                    modules.append((label, obj))
                elif isinstance(obj, torch.optim.Optimizer):
                    optimizers.append((label, obj))
                else:
                    continue
                seen.add(id(obj))
    inner = {id(m) for _, root in modules for m in list(root.modules())[1:]}
    return tensors, [(n, m) for n, m in modules if id(m) not in inner], optimizers, unreadable


# --- 06_any_layer_any_node.ipynb, cell 136 ---
# @title Where the error was raised, and what the optimizers hold
import os

import torch
from torch import nn


def _frame_text(error, frame, own):
    """'function (file, line N)': torch's files from torch/, others by name."""
    path = frame.f_code.co_filename
    path = ("torch/" + path[len(_TORCH_DIR):].replace(os.sep, "/") if own
            else os.path.basename(path))
    return f"{frame.f_code.co_name} ({path}, line {_raised_at(error, frame)})"


def _raised_in(error, roots):
    """Where the error was raised (the innermost frame, torch's or not), on
    which of your modules (the innermost frame whose `self` or `module` is
    one), and the innermost frame of torch's: (text, module name, torch's)."""
    frames = _frames(error)
    if not frames:
        return "", "", ""
    where = _frame_text(error, *frames[-1])
    in_torch = [f for f, own in frames if own]
    torch_where = _frame_text(error, in_torch[-1], True) if in_torch else ""
    names = {id(m): ".".join(filter(None, [root_name, path]))
             for root_name, root in roots for path, m in root.named_modules()}
    for frame, _ in reversed(frames):
        held = [frame.f_locals.get(k) for k in ("self", "module")]
        found = next((m for m in held if id(m) in names), None)
        if found is not None:
            return f"{where}, in {names[id(found)]} ({type(found).__name__})", \
                names[id(found)], torch_where
    return where, "", torch_where


def _optimizer_findings(optimizers, names):
    """Lines on optimizer state whose shape is not its parameter's, and on
    parameters an optimizer steps that no module of yours holds."""
    stale, orphans = [], []
    for label, optimizer in optimizers:
        count = 0
        for group in optimizer.param_groups:
            for param in group["params"]:
                name = names.get(id(param))
                count += name is None
                for key, value in optimizer.state.get(param, {}).items():
                    if isinstance(value, torch.Tensor) and value.dim() > 0 and \
                            value.shape != param.shape:
                        stale.append(f"{label}'s state {key!r} for "
                                     f"{name or 'a parameter'} is {list(value.shape)}; "
                                     f"the parameter is {list(param.shape)}")
        if count and names:
            orphans.append(f"{label} steps {count} tensor(s) that none of your modules "
                           "holds: old parameters, if you gave a module new ones")
    return stale, orphans


# --- 06_any_layer_any_node.ipynb, cell 137 ---
# @title doctor, and the IPython extension that calls it
import re
import sys

import torch
from torch import nn

def doctor(error, namespace=None):
    """Examine an error with the objects it left behind: the traceback's frames
    (their locals), and `namespace` (a notebook's globals()). Reads the graph
    of every tensor found, every module's tensors and links, every optimizer's
    state; changes nothing, keeps nothing, never raises. A Checkup."""
    if not isinstance(error, BaseException):
        raise TypeError(f"error must be an exception, got {type(error).__name__}")
    if namespace is not None and not isinstance(namespace, dict):
        raise TypeError(f"namespace must be a dict (globals()), got {type(namespace).__name__}")
    message = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
    try:
        return _examine(error, namespace, message)
    except Exception as failure:          # never raise over the reader's own error
        return Checkup(message, "", "unknown", (), DOCTOR_FIXES["unknown"], "", (),
                       (f"the examination stopped: {type(failure).__name__}: {failure}",))


def _examine(error, namespace, message):
    tensors, roots, optimizers, unreadable = _gather(_scopes(error, namespace))
    named = nn.ModuleDict()
    for name, module in roots:
        if name and "." not in name and name not in named and not hasattr(nn.ModuleDict, name):
            named[name] = module          # a new container: the modules are not changed
    names = {id(p): n for n, p in named.named_parameters()}
    listed = lambda found: (f" ({', '.join(n for n, _ in found[:4])}"
                            f"{', ...' if len(found) > 4 else ''})" if found else "")
    looked_at = (f"{len(tensors)} tensor(s) with a graph{listed(tensors)}",
                 f"{len(roots)} model(s){listed(roots)}",
                 f"{len(optimizers)} optimizer(s){listed(optimizers)}")
    not_seen = ["objects held only outside Python, or by functions still running "
                "(pass their locals() as the namespace)",
                "your data (batches, ids, index tensors), files and configs, and the order "
                "of your loop's steps: the doctor reads objects, not how they were made",
                *unreadable]
    stale, orphans = _optimizer_findings(optimizers, names)
    reading = read_message(_error_text(error))         # the frames decide where
    raised_in, failing, torch_where = _raised_in(error, roots)
    failing_outputs = _backward_outputs(error)
    in_backward = bool(failing_outputs)
    if reading.kind == "shape":
        found = diagnose_invalid_gradient(error, failing_outputs or [t for _, t in tensors],
                                          named or None)
        parsed = found.error
        findings = [f"{parsed.node}'s edge {parsed.index} ends in {found.tensor}: "
                    f"recorded {found.recorded}"
                    + ("" if found.current is None else f", {found.current} now")
                    ] if isinstance(parsed, InvalidGradient) and found.tensor else []
        findings += list(found.evidence) + stale + orphans
        if not tensors:
            not_seen.insert(0, "the tensor whose backward() failed: no tensor with a graph "
                               "is in your frames or namespace")
        cause, fix = found.cause, found.fix
    else:
        problems = [p for name, module in roots for p in check_module_shapes(module, name)]
        first = lambda p: not (failing and (p.module + ".").startswith(failing + "."))
        real = [str(p) for p in sorted(problems, key=first) if p.kind != "unchecked"]
        not_seen += [str(p) for p in problems if p.kind == "unchecked"]
        in_average = "swa_utils" in torch_where or reading.where == "average"
        in_optimizer = "torch/optim/" in torch_where and not in_average
        old_grads = [str(p) for p in problems if p.tensor.endswith(".grad")]
        hooks = _hook_findings(list(named.named_parameters()))
        averages = _average_findings(roots)
        module, function = _failing_module(error)
        sized = (_sized_tensors(module, failing or type(module).__name__,
                                (reading.fields["got"], reading.fields["expected"]), function)
                 if reading.kind == "broadcast" and module is not None else [])
        text = str(error)
        held = (_held_graphs(failing_outputs, roots)
                if reading.kind == "second backward" else [])
        computed = (_reparametrized(roots) if re.search(
            r"non-leaf|graph leaves|second time|has to be pruned", text) else [])
        frozen = _frozen(roots) if re.search(r"require[sd]? grad", text) else []
        loaded, load_fix = _checkpoint_findings(error)
        siblings = _siblings(roots) if not real else []
        odd = _nonfinite(roots) if re.search(r"non-finite|\bnan\b|\binf\b", text, re.I) else []
        mixed = (_mixed(error, module, failing or type(module).__name__) if module is not None
                 and re.search(r"dtype|[Dd]ouble|[Ff]loat|[Hh]alf|device", text) else [])
        after_forward = in_backward or in_optimizer           # the step, not the forward
        changed = _changed_records(failing_outputs or [t for _, t in tensors], names) \
            if after_forward else []
        given = _functional_params(error)
        views = (_view_settings(error, reading.fields["shape"], reading.fields["size"])
                 if reading.kind == "view" else [])
        findings = stale + real + orphans if in_optimizer else real + stale + orphans
        if stale and in_optimizer:
            cause, fix = "optimizer state", FIXES["optimizer state"]
        elif averages and in_average:
            cause, findings = "average copy", averages + findings
            fix = (DOCTOR_FIXES["average order"] if any(" in another order " in line
                                                        for line in averages)
                   else CAUSES["average copy"][0])
        elif in_backward and hooks:
            cause, fix, findings = "hook", FIXES["hook"], hooks + findings
        elif in_backward and changed:
            cause, fix, findings = "recorded before the cut", FIXES["recorded before the cut"], changed + findings
        elif after_forward and old_grads:      # kept from a step before, or made by
            cause, fix, findings = "old grad", FIXES["old grad"], old_grads + changed + findings
        elif loaded and load_fix:
            cause, fix, findings = "state dict", load_fix, loaded + findings
        elif given:
            cause, fix, findings = "kept tensor", FIXES["kept tensor"], given + findings
        elif held and "module keeps" in held[0]:
            cause, fix, findings = "kept tensor", FIXES["kept tensor"], held + computed + findings
        elif computed and not reading.kind == "second backward":
            cause, fix = "prune reparametrization", DOCTOR_FIXES["prune reparametrization"]
            findings = computed + findings
        elif views:
            cause, fix, findings = "forward error", FIXES["forward error"], views + findings
        elif real and not after_forward:
            cause, fix, findings = "forward error", FIXES["forward error"], sized + findings
        else:                    # nothing seen decides: what the text says, and the leads
            cause = "unknown" if reading.kind == "unknown" else reading.cause
            fix = DOCTOR_FIXES["unknown"] if reading.kind == "unknown" else reading.likely
            findings = (sized + loaded + held + computed + frozen + mixed + odd + siblings
                        + findings) or [
                "nothing in your modules or optimizers disagrees with itself"]
    return Checkup(message, raised_in, cause, tuple(dict.fromkeys(findings)), fix,
                   READ.get(cause, ""),
                   looked_at, tuple(not_seen))


def _on_error(shell, etype, value, tb, tb_offset=None):
    """IPython's handler for the errors the doctor reads: the usual traceback,
    then the checkup."""
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    checkup = doctor(value, shell.user_ns)
    if checkup.cause == "unknown" and not checkup.findings and isinstance(value, ValueError):
        print("pruning doctor: nothing in this error or in your objects that it reads")
    else:
        print(checkup)


def load_ipython_extension(ip):
    """%load_ext pruning_doctor: every RuntimeError, IndexError or ValueError
    of a cell is followed by the doctor's checkup."""
    ip.set_custom_exc((RuntimeError, IndexError, ValueError), _on_error)


def unload_ipython_extension(ip):
    ip.set_custom_exc((), None)

"""Chapter 2: the helpers that find and filter the raise site, and the stored evidence."""
import re

import nbformat
import pytest
import torch

from tools.book import BOOK, torch_pin
from tools.exports import load_exports

ch = load_exports("02_where_the_error_is_raised.ipynb")

SAMPLE_REPORT = """Function TBackward0 returned an invalid gradient at index 0 - got [10, 90]
Exception raised from operator() at /__w/pytorch/pytorch/torch/csrc/autograd/input_metadata.cpp:64 (most recent call first):
C++ CapturedTraceback:
#4 std::_Function_handler<std::shared_ptr<c10::LazyValue<std::string> const> (), X>::_M_invoke(std::_Any_data const&) from Logging.cpp:0
#7 torch::autograd::InputMetadata::maybe_reduce(unsigned long, at::Tensor, std::function<std::string (std::string const&)> const&) const::{lambda()#1}::operator()() const from input_metadata.cpp:0
#8 torch::autograd::InputMetadata::maybe_reduce(unsigned long, at::Tensor) const from ??:0
#9 void torch::autograd::validate_outputs_impl<torch::autograd::Edge>(std::vector<torch::autograd::Edge, std::allocator<torch::autograd::Edge> > const&) from engine.cpp:0
#10 torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&) from ??:0
#16 THPEngine_run_backward(_object*, _object*, _object*) from python_engine.cpp:0
#17 cfunction_call from /tmp/python-build/Objects/methodobject.c:542
"""


def test_raise_site_reads_function_file_and_line():
    assert ch.raise_site(SAMPLE_REPORT) == (
        "operator()", "torch/csrc/autograd/input_metadata.cpp", 64)
    assert ch.raise_site("no C++ trace here") is None
    with pytest.raises(TypeError, match="error's text"):
        ch.raise_site(None)


def test_cpp_frames_drop_arguments_templates_and_foreign_frames():
    assert ch.cpp_frames(SAMPLE_REPORT) == [
        "torch::autograd::InputMetadata::maybe_reduce",
        "torch::autograd::validate_outputs_impl<...>",
        "torch::autograd::Engine::evaluate_function",
        "THPEngine_run_backward"]
    assert ch.frame_name("void a::f<b::C<int>>(int) const") == "a::f<...>"


def test_the_engine_check_has_three_outcomes():
    outcome = ch.returned_gradient_outcome
    assert outcome([3], [3]) == ([3], [1.0])
    assert outcome([3], [2, 3]) == ([3], [2.0])               # summed down
    assert outcome([2, 3], [2, 1]).endswith(
        "got [2, 1] but expected shape compatible with [2, 3]")
    with pytest.raises(ValueError, match="sequence of ints"):
        outcome([3], [-1])


def pruned_layer_loss():
    layer = torch.nn.Linear(100, 10)
    x = 5 - torch.sum(layer(torch.ones(100)))
    layer.weight.data = layer.weight.data[:, :90]
    return x, 5 - torch.sum(layer(torch.ones(90)))


def test_watching_gradients_logs_and_removes_its_hooks_even_on_error():
    old_loss, loss = pruned_layer_loss()
    with pytest.raises(RuntimeError, match="TBackward0 returned an invalid gradient"):
        with ch.watching_gradients(loss.grad_fn) as log:
            loss.backward(retain_graph=True)
    assert "into    TBackward0: [[90, 10]]" in log
    assert "out of  AddmmBackward0: [[10], None, [90, 10]]\n" \
           "        next nodes recorded: [[10], None, [90, 10]]" in log
    assert not any(entry.startswith("out of  TBackward0") for entry in log)
    logged = len(log)
    with pytest.raises(RuntimeError):
        loss.backward()
    assert len(log) == logged, "hooks were left on the graph"


def test_watching_gradients_refuses_what_is_not_a_node():
    with pytest.raises(TypeError, match="grad_fn node"):
        with ch.watching_gradients(torch.ones(2)):
            pass


def test_show_source_lines_finds_the_t_entry_and_refuses_missing_text(capsys):
    line = ch.show_source_lines(
        "torchgen/packaged/autograd/derivatives.yaml", r"^- name: t\(Tensor", after=1)
    printed = capsys.readouterr().out
    assert f"{line:6}  - name: t(Tensor(a) self)" in printed
    assert f"{line + 1:6}    self: grad.t()" in printed
    with pytest.raises(LookupError):
        ch.show_source_lines("torchgen/packaged/autograd/derivatives.yaml", "NO SUCH")
    with pytest.raises(FileNotFoundError):
        ch.show_source_lines("torch/no_such_file.h", "x")


def test_show_source_lines_cuts_long_lines_to_width(tmp_path, capsys):
    (tmp_path / "source.txt").write_text("short\n" + "x" * 200 + "\n")
    ch.show_source_lines("source.txt", "short", after=1, root=tmp_path, width=40)
    printed = capsys.readouterr().out.splitlines()
    assert printed[1] == "     1  short"
    assert len(printed[2]) == 40 and printed[2].endswith("x…")
    with pytest.raises(ValueError, match="width"):
        ch.show_source_lines("source.txt", "short", root=tmp_path, width=5)


def test_fold_error_splits_after_the_dash_and_keeps_the_text():
    message = ("Function TBackward0 returned an invalid gradient at index 0 - "
               "got [10, 90] but expected shape compatible with [10, 100]")
    folded = ch.fold_error(message, indent="  ")
    assert folded.splitlines() == [
        "  Function TBackward0 returned an invalid gradient at index 0 -",
        "  got [10, 90] but expected shape compatible with [10, 100]"]
    assert ch.fold_error("no dash here") == "    no dash here"
    with pytest.raises(TypeError, match="needs a str"):
        ch.fold_error(None)


def test_stored_outputs_name_the_raise_site_and_link_it():
    chapter = nbformat.read(BOOK / "02_where_the_error_is_raised.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in chapter.cells if c.cell_type == "code"
                   for o in c.outputs)
    assert "raised from operator() at torch/csrc/autograd/input_metadata.cpp:" in text
    assert (f"https://github.com/pytorch/pytorch/blob/v{torch_pin()}/"
            "torch/csrc/autograd/input_metadata.cpp#L") in text
    assert "torch::autograd::validate_outputs_impl<...>" in text
    assert "Error detected in TBackward0." in text


# Found by mutation testing (mutmut on the export cells).

def test_source_links_point_at_the_installed_release():
    """A release (2.13.0, 2.13.0+cpu) links to its tag; anything else to main."""
    release = torch.__version__.split("+")[0]
    tag = f"v{release}" if re.fullmatch(r"\d+\.\d+\.\d+", release) else "main"
    assert ch.GITHUB == f"https://github.com/pytorch/pytorch/blob/{tag}"


def test_show_source_lines_shows_exactly_the_context_asked_for(tmp_path, capsys):
    (tmp_path / "source.txt").write_text("one\ntwo\nthree\nfour\nfive\nsix\n")
    assert ch.show_source_lines("source.txt", "three", after=1, before=1, root=tmp_path) == 3
    assert capsys.readouterr().out.splitlines() == [
        "source.txt:", "     2  two", "     3  three", "     4  four"]
    ch.show_source_lines("source.txt", "three", after=0, root=tmp_path, width=20)
    assert capsys.readouterr().out.splitlines() == ["source.txt:", "     3  three"]
    ch.show_source_lines("source.txt", "two", root=tmp_path)  # the match and 3 lines after
    assert [line.split()[-1] for line in capsys.readouterr().out.splitlines()[1:]] == [
        "two", "three", "four", "five"]
    with pytest.raises(ValueError, match="before and after"):
        ch.show_source_lines("source.txt", "three", before=-1, root=tmp_path)
    (tmp_path / "wide.txt").write_text("x" * 88 + "\n" + "y" * 89 + "\n")
    ch.show_source_lines("wide.txt", "x", root=tmp_path)  # 96 wide: 96 shown whole, 97 cut
    assert capsys.readouterr().out.splitlines()[1:] == [
        "     1  " + "x" * 88, "     2  " + "y" * 87 + "…"]


def test_frame_name_keeps_what_follows_a_template():
    assert ch.frame_name("void ns::A<int>::f(std::vector<int>) const") == "ns::A<...>::f"


def test_cpp_frames_merge_only_neighbouring_repeats():
    """A frame that comes back further down (a backward run inside another
    backward) stays in the stack: only a repeat next to itself is merged."""
    report = "\n".join(f"#{i} {name}() from engine.cpp:0" for i, name in enumerate([
        "torch::autograd::Engine::thread_main", "torch::autograd::Engine::thread_main",
        "torch::autograd::Engine::evaluate_function", "torch::autograd::Engine::thread_main"]))
    assert ch.cpp_frames(report) == ["torch::autograd::Engine::thread_main",
                                     "torch::autograd::Engine::evaluate_function",
                                     "torch::autograd::Engine::thread_main"]

"""The versions matrix and the wheel facts: their tables, their cache key,
and pip's configuration read for a cap on torch (nothing is installed)."""
import json
import os
import sys
import zipfile

import nbformat

from tools.pip_config import constraint_files, pip_environment, torch_cap, torch_excluded
from tools import versions
from tools.versions import notebook_key, table_text, venv_pins
from tools.wheel_facts import INCLUDE, MISSING, facts
from tools.wheel_facts import table_text as wheel_table_text

MACHINE = {"cores": 2, "arch": "x86_64"}


def result(key, seconds=4.2, **extra):
    return {"status": "pass", "key": key, "date": "2026-12-04", "seconds": seconds,
            "new_stderr": [], "machine": MACHINE, **extra}


def small_results():
    return {
        "2.5.1": {"chapters": {
            "01_one": result("k1", status="fail", cell=3, seconds=1.0,
                             error="RuntimeError: Function TBackward0 returned an invalid "
                                   "gradient\nsecond line",
                             line="loss.backward()"),
            "02_two": result("old-key", seconds=7.6)}},
        "2.13.0": {"chapters": {
            "01_one": result("k1", new_stderr=[[2, "UserWarning: deprecated"]]),
            "02_two": result("k2", machine={"cores": 8, "arch": "aarch64"})},
            "probe": {"torch": "2.13.0+cpu", "python": "3.11.7", "cuda_build": None,
                      "get_gradient_edge": True, "_input_metadata": True,
                      "linear_1d": "ViewBackward0 -> AddmmBackward0",
                      "nan_raise_site": None}},
    }


def test_table_marks_stale_keys_and_numbers_the_notes():
    text = table_text(small_results(), ["2.5.1", "2.13.0"], {"01_one": "k1", "02_two": "k2"})
    rows = text.split("\n\n")[0].splitlines()
    assert rows[0] == "| torch | 01 | 02 |"
    assert rows[2] == "| 2.5.1 | **fail** [1], 1 s | pass, 8 s, stale |"
    assert rows[3] == "| 2.13.0 | pass [2], 4 s | pass, 4 s |"
    assert ("1. torch 2.5.1, 01_one: cell 3: `RuntimeError: Function TBackward0 returned "
            "an invalid gradient` at `loss.backward()`") in text
    assert ("2. torch 2.13.0, 01_one: passes, but prints on stderr in cell 2: "
            "`UserWarning: deprecated`") in text
    assert "**3 of 4 results are current**" in text and "The 1 marked *stale*" in text
    fresh = table_text({"2.13.0": small_results()["2.13.0"]}, ["2.13.0"],
                       {"01_one": "k1", "02_two": "k2"})
    assert "**2 of 2 results are current**" in fresh and "stale" not in fresh
    assert ("| 2.13.0+cpu | CPU | `ViewBackward0 -> AddmmBackward0` | yes | yes | "
            "not probed | no raise site |") in text


def test_a_fact_the_probe_read_is_shown_and_an_older_row_says_not_probed():
    data = small_results()
    data["2.15.0"] = {"chapters": {}, "probe": dict(
        data["2.13.0"]["probe"], torch="2.15.0+cpu", batch_norm_update_stats=True)}
    text = table_text(data, ["2.13.0", "2.15.0"], {"01_one": "k1", "02_two": "k2"})
    assert "| `torch.batch_norm_update_stats` |" in text
    assert "| 2.13.0+cpu | CPU | `ViewBackward0 -> AddmmBackward0` | yes | yes | not probed |" \
        in text
    assert "| 2.15.0+cpu | CPU | `ViewBackward0 -> AddmmBackward0` | yes | yes | yes |" in text


def test_table_prints_the_machines_recorded():
    text = table_text(small_results(), ["2.5.1", "2.13.0"], {"01_one": "k1", "02_two": "k2"})
    assert ("wall time on 2 cores, x86_64 (torch 2.5.1 to 2.13.0); "
            "8 cores, aarch64 (torch 2.13.0).") in text
    assert "2-core" not in text and "shared" not in text
    data = small_results()
    for row in data.values():
        for run in row["chapters"].values():
            del run["machine"]
    assert "wall time on a machine that was not recorded." in table_text(
        data, ["2.5.1"], {"01_one": "k1", "02_two": "k2"})


def test_table_without_stale_keys_has_no_star_note():
    data = small_results()
    data["2.5.1"]["chapters"]["02_two"]["key"] = "k2"
    text = table_text(data, ["2.5.1", "2.13.0"], {"01_one": "k1", "02_two": "k2"})
    assert "*" not in text.split("\n\n")[0].replace("**fail**", "")
    assert "earlier version" not in text


def test_a_chapter_that_writes_files_gets_a_note():
    data = {"2.13.0": {"chapters": {"01_one": result("k1", files_written=["model.pt"])}}}
    text = table_text(data, ["2.13.0"], {"01_one": "k1"})
    assert "| 2.13.0 | pass [1], 4 s |" in text
    assert "1. torch 2.13.0, 01_one: passes, but writes `model.pt`" in text


def write_notebook(path, *sources):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(notebook, path)


def test_key_changes_with_a_pin_and_with_the_code(tmp_path):
    path = tmp_path / "01_one.ipynb"
    write_notebook(path, "# @title Setup\nimport torch", "print(1)")
    pinned = {"torchviz": "0.0.3", "matplotlib": "3.11.2"}
    key = notebook_key(path, pinned)
    assert key == notebook_key(path, dict(reversed(list(pinned.items()))))
    assert key != notebook_key(path, {**pinned, "matplotlib": "3.11.3"})
    assert key != notebook_key(path, {"torchviz": "0.0.3"})
    write_notebook(path, "# @title Set up\nimport torch", "print(1)")
    assert key == notebook_key(path, pinned), "a title is not code"
    write_notebook(path, "import torch", "print(2)")
    assert key != notebook_key(path, pinned)


def test_key_pins_are_those_installed_beside_torch():
    pinned = {"torch": "2.13.0", "torchviz": "0.0.3", "pytest": "9.2.0",
              "torch-pruning": "1.6.1"}
    assert venv_pins(pinned) == {"torchviz": "0.0.3", "torch-pruning": "1.6.1"}


def test_a_venv_satisfies_pins_by_name_and_release_local_builds_included():
    have = {"torch": "2.13.0+cpu", "scikit-learn": "1.7.1", "nbclient": "0.10.2"}
    assert versions.satisfied(["torch==2.13.0", "scikit_learn==1.7.1", "nbclient"], have)
    for wanted in (["torch==2.13.1"], ["torch==2.13"], ["matplotlib"], ["nbclient==0.10"]):
        assert not versions.satisfied(wanted, have), wanted


def test_torch_lines_of_a_constraints_file():
    text = "# local\ntorchvision<=0.29.1\ntorch<=2.14.1  # on disk\n"
    assert torch_excluded("2.15.0", text) == "torch<=2.14.1"
    assert torch_excluded("2.14.1", text) is None
    assert torch_excluded("2.5.1", "torch>=2.6,<3") == "torch>=2.6,<3"
    assert torch_excluded("2.13.0", "torch==2.13.*") is None
    assert torch_excluded("2.14.0", "torch~=2.13.0") == "torch~=2.13.0"


def test_constraint_files_from_pip_config_and_environment(tmp_path):
    listed = (":env:.find-links='/opt/wheels'\n"
              f"global.constraint='{tmp_path}/a.txt'\n"
              "site.constraint='https://example.org/c.txt'\n")
    found = constraint_files(listed, {"PIP_CONSTRAINT": f"{tmp_path}/a.txt {tmp_path}/b.txt"})
    assert found == [tmp_path / "a.txt", tmp_path / "b.txt"]


def fake_pip_config(tmp_path, cap):
    """An environment in which pip's only configuration file is a fake one
    naming a constraints file with `cap`."""
    (tmp_path / "constraints.txt").write_text(f"{cap}\n")
    (tmp_path / "pip.conf").write_text(
        f"[global]\nconstraint = {tmp_path / 'constraints.txt'}\n")
    (tmp_path / "no-global-config").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=str(tmp_path / "pip.conf"),
               XDG_CONFIG_DIRS=str(tmp_path / "no-global-config"),
               HOME=str(tmp_path))
    return env


def test_pip_runs_without_its_configuration_only_past_the_cap(tmp_path):
    env = fake_pip_config(tmp_path, "torch<=2.14.1")
    assert torch_cap("2.15.0", sys.executable, env) == (tmp_path / "constraints.txt",
                                                        "torch<=2.14.1")
    assert pip_environment("2.15.0", sys.executable, env)["PIP_CONFIG_FILE"] == os.devnull
    kept = pip_environment("2.14.1", sys.executable, env)
    assert kept["PIP_CONFIG_FILE"] == str(tmp_path / "pip.conf")


def test_a_cap_set_by_pip_constraint_is_dropped(tmp_path):
    env = fake_pip_config(tmp_path, "numpy<3")
    (tmp_path / "env-cap.txt").write_text("torch<2.6\n")
    env["PIP_CONSTRAINT"] = str(tmp_path / "env-cap.txt")
    assert torch_cap("2.5.1", sys.executable, env) is None
    freed = pip_environment("2.6.0", sys.executable, env)
    assert freed["PIP_CONFIG_FILE"] == os.devnull and "PIP_CONSTRAINT" not in freed


def fake_wheel(path, members):
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in members.items():
            wheel.writestr(name, text)
    return path


def test_wheel_facts_tell_a_missing_file_from_an_absent_feature(tmp_path):
    wheel = fake_wheel(tmp_path / "torch-9.9.9-cp311-cp311-linux_x86_64.whl", {
        "torch/autograd/graph.py": "def register_hook():\n    pass\n",
        INCLUDE + "variable.h": "  std::weak_ptr<Node> grad_accumulator_;\n",
        "torch/lib/libtorch_python.so": b"\x00other_name\x00",
    })
    found = facts(wheel)
    assert found["get_gradient_edge"] is False       # graph.py is there, without it
    assert found["register_prehook"] is False
    assert found["maybe_reduce"] is None             # input_metadata.h is not there
    assert found["_input_metadata"] is False
    assert found["validate_outputs_impl"] is None    # no libtorch_cpu.so
    assert found["transpose_node"] is None           # no Functions.h
    assert found["accumulator_field"] == "std::weak_ptr<Node>"
    assert found["try_get_grad_accumulator"] == []
    assert found["t_formula"] is None and found["derivatives_yaml"] is None
    text = wheel_table_text({"9.9.9": found})
    assert (f"| 9.9.9 | {MISSING} | `weak_ptr` | none | {MISSING} | {MISSING} |") in text
    assert f"| 9.9.9 | no | no | no | {MISSING} |" in text
    json.dumps(found)  # stored as JSON


def test_wheel_facts_read_the_convolution_nodes_into_a_table_of_their_own(tmp_path):
    header = ("struct TORCH_API TBackward0 : public TraceableFunction {\n"
              "struct TORCH_API ConvolutionBackward0 : public TraceableFunction {\n"
              "struct TORCH_API ConvolutionBackwardBackward0 : public Node {\n"
              "struct TORCH_API CudnnConvolutionBackward0 : public TraceableFunction {\n")
    wheel = fake_wheel(tmp_path / "torch-9.9.9-cp311-cp311-linux_x86_64.whl",
                       {INCLUDE + "generated/Functions.h": header})
    old = fake_wheel(tmp_path / "torch-0.9.0-cp37-cp37m-linux_x86_64.whl", {})
    assert "convolution_nodes" not in facts(wheel)              # only when asked
    both = facts(wheel, convolution=True)
    assert both["convolution_nodes"] == ["ConvolutionBackward0", "CudnnConvolutionBackward0"]
    assert both["transpose_node"] == "TBackward0"
    alone = facts(old, convolution=True, only_convolution=True)
    assert alone == {"wheel": old.name, "convolution_nodes": None}   # no Functions.h
    text = wheel_table_text({"9.9.9": both, "0.9.0": alone})
    assert "| 9.9.9 | `ConvolutionBackward0`, `CudnnConvolutionBackward0` |" in text
    assert f"| 0.9.0 | {MISSING} |" in text
    assert "| 0.9.0 | " not in text.split("The convolution's backward nodes")[0]


def test_key_ignores_comments_and_docstrings(tmp_path):
    """A docstring reworded or a comment added leaves a chapter's stored runs
    current; a change of code does not."""
    path = tmp_path / "01_one.ipynb"
    pinned = {"torchviz": "0.0.3"}
    code = 'def f(x):\n    """Twice x."""\n    return 2 * x'
    write_notebook(path, "%xmode Minimal\nimport torch", code)
    key = notebook_key(path, pinned)
    write_notebook(path, "%xmode Minimal\nimport torch  # the one import",
                   code.replace("Twice x.", "Two times x.") + "  # doubled")
    assert notebook_key(path, pinned) == key
    write_notebook(path, "%xmode Minimal\nimport torch", code.replace("2 * x", "x + x"))
    assert notebook_key(path, pinned) != key
    write_notebook(path, "%xmode Plain\nimport torch", code)
    assert notebook_key(path, pinned) != key

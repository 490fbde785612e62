"""`make setup` installs with uv as pip is configured (tools/uv_setup.py):
what pip would take (indexes, local wheels, constraints, certificate) is
what uv is told; pip's precedence (a PIP_* variable over the files, the
install section over global) is kept; and a venv it set up holds exactly
the pins of requirements.txt, compiled to bytecode as pip leaves it (the
grader's sandbox mounts the venv read-only)."""
import re
import subprocess

import pytest

from tools.book import ROOT
from tools.uv_setup import SetupError, constraint_files, settings, uv_command

LISTED = """global.cert='/etc/ssl/certs/ca.crt'
global.constraint='/etc/pip/constraints.txt'
global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'
global.find-links='/opt/old'
global.index-url='https://mirror.example/simple'
install.index-url='https://install.example/simple'
:env:.find-links='/opt/wheels'
:env:.default-timeout='180'
"""


def test_a_variable_wins_over_the_files_and_install_over_global():
    found = settings(LISTED)
    assert found["find-links"] == "/opt/wheels"
    assert found["index-url"] == "https://install.example/simple"
    assert found["extra-index-url"] == "file:///opt/a/simple file:///opt/b/simple"


def test_uv_is_told_what_pip_would_use():
    argv, environ = uv_command("uv", "py", LISTED, ["-r", "requirements.txt"])
    assert argv[:4] == ["uv", "pip", "install", "--python"]
    pairs = list(zip(argv, argv[1:]))
    for pair in [("--index-url", "https://install.example/simple"),
                 ("--extra-index-url", "file:///opt/a/simple"),
                 ("--extra-index-url", "file:///opt/b/simple"),
                 ("--find-links", "/opt/wheels"), ("--constraint", "/etc/pip/constraints.txt"),
                 ("--index-strategy", "unsafe-best-match")]:
        assert pair in pairs, pair
    assert ("--find-links", "/opt/old") not in pairs
    assert "--compile-bytecode" in argv       # as pip does: a read-only venv needs it
    assert argv[-2:] == ["-r", "requirements.txt"]
    assert environ == {"SSL_CERT_FILE": "/etc/ssl/certs/ca.crt"}


def test_without_configuration_uv_gets_no_index_options():
    argv, environ = uv_command("uv", "py", "", ["torch==2.13.0"])
    assert not any(a.startswith(("--index-url", "--find-links", "--constraint")) for a in argv)
    assert environ == {}


def test_nothing_to_install_is_refused():
    with pytest.raises(SetupError, match="nothing to install"):
        uv_command("uv", "py", LISTED, [])


def test_constraint_files_from_the_listing_and_the_variable(tmp_path):
    found = constraint_files(LISTED, {"PIP_CONSTRAINT": f"{tmp_path}/a.txt https://x/c.txt"})
    assert [str(p) for p in found] == ["/etc/pip/constraints.txt", f"{tmp_path}/a.txt"]


def test_the_venvs_modules_are_compiled():
    """A kernel in the grader's read-only sandbox imports torch without
    compiling it: the venv holds torch's bytecode (and nbgrader's)."""
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", (
        "import importlib.util, os, sys, torch, nbgrader, sklearn\n"
        "for module in (torch, nbgrader, sklearn, torch.nn.modules.linear):\n"
        "    cached = importlib.util.cache_from_source(module.__file__)\n"
        "    print(module.__name__, os.path.isfile(cached))")],
        capture_output=True, text=True, check=True, env={"PYTHONDONTWRITEBYTECODE": "1"})
    assert "False" not in done.stdout, done.stdout


def test_the_venv_holds_the_pins_of_requirements_txt():
    """The venv `make setup` made (uv) has every pinned package at its pin."""
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements.txt").read_text(),
                           re.M))
    listed = subprocess.run([str(ROOT / ".venv" / "bin" / "uv"), "pip", "list", "--python",
                             str(ROOT / ".venv" / "bin" / "python"), "--format=freeze"],
                            capture_output=True, text=True, check=True).stdout
    installed = {name.lower().replace("_", "-"): version.split("+")[0] for name, version in
                 re.findall(r"^(\S+)==(\S+)$", listed, re.M)}
    wrong = {name: (pin, installed.get(name.lower().replace("_", "-")))
             for name, pin in pins.items()
             if installed.get(name.lower().replace("_", "-")) != pin}
    assert wrong == {}

"""Install requirements into a venv with uv, as pip is configured.

    python -m tools.uv_setup VENV_PYTHON -r requirements.txt

`make setup` runs this with the new venv's own Python (nothing but the
standard library and pip in it yet, so this module imports nothing of the
project's). uv installs the same pinned packages as pip would, several times
faster (pip spent a minute of each CI run here). uv does not read pip's
configuration, so the settings that choose what gets installed are carried
over from `pip config list` (configuration files and PIP_* variables):
index-url, extra-index-url, find-links and constraint become uv's options,
cert its SSL_CERT_FILE; and, as pip does, uv takes the best version found on
any index (uv's default would stop at the first index that has a package).
Like pip, it compiles every module to bytecode as it installs: the grader's
sandbox mounts the venv read-only, and a kernel there would otherwise
compile torch anew each time it starts.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

# `python -m pip config list` prints one `section.key='value'` a line: the
# files' settings under their section (global, install, ...), merged; the
# PIP_* variables under `:env:`, which win over the files, as in pip.
CONFIG_LINE = re.compile(r"(?P<section>[^.\s]*)\.(?P<key>[a-z-]+)='(?P<value>.*)'")
SECTIONS = ("global", "install")       # the ones `pip install` reads, in order
OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
           "find-links": "--find-links", "constraint": "--constraint"}


class SetupError(Exception):
    pass


def settings(config_list):
    """{key: value} that `pip install` uses, from `pip config list`'s output:
    a variable wins over the files, the install section over global."""
    found, ranks = {}, {}
    for line in config_list.splitlines():
        match = CONFIG_LINE.fullmatch(line.strip())
        if not match:
            continue
        section = match["section"]
        rank = 9 if section == ":env:" else (SECTIONS.index(section)
                                             if section in SECTIONS else None)
        if rank is not None and rank >= ranks.get(match["key"], -1):
            found[match["key"]], ranks[match["key"]] = match["value"], rank
    return found


def constraint_files(config_list, environ):
    """The constraint files that pip's configuration and PIP_CONSTRAINT
    name, each once, in that order (URLs left out)."""
    named = []
    for line in config_list.splitlines():
        match = CONFIG_LINE.fullmatch(line.strip())
        if match and match["key"] == "constraint":
            named += match["value"].split()
    named += environ.get("PIP_CONSTRAINT", "").split()
    paths = []
    for name in named:
        if name.startswith("file://"):
            name = name[len("file://"):]
        elif "://" in name:
            continue
        path = Path(name).expanduser()
        if path not in paths:
            paths.append(path)
    return paths


def uv_command(uv, python, config_list, arguments):
    """(argv, extra environment) of `uv pip install` for `arguments`, with
    pip's settings from `config_list`."""
    if not arguments:
        raise SetupError("nothing to install: give requirements, e.g. -r requirements.txt")
    found = settings(config_list)
    argv = [str(uv), "pip", "install", "--python", str(python),
            "--index-strategy", "unsafe-best-match", "--compile-bytecode", "--quiet"]
    for key, option in OPTIONS.items():
        for value in found.get(key, "").split():
            argv += [option, value]
    environ = {"SSL_CERT_FILE": found["cert"]} if "cert" in found else {}
    return argv + list(arguments), environ


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    python = Path(argv[0])
    uv = python.parent / "uv"
    if not uv.is_file():
        print(f"{uv} is missing: install uv into the venv first "
              f"({python} -m pip install uv)", file=sys.stderr)
        return 1
    config = subprocess.run([str(python), "-m", "pip", "config", "list"],
                            capture_output=True, text=True)
    try:
        command, environ = uv_command(uv, python, config.stdout, argv[1:])
    except SetupError as error:
        print(error, file=sys.stderr)
        return 2
    return subprocess.run(command, env={**os.environ, **environ}).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

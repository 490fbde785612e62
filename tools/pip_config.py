"""Whether pip's configuration keeps a torch release out, and pip's
environment for installing or downloading that release.

A machine may constrain packages in pip's configuration: a constraints file
named by `constraint = ...` in a pip.conf, or by PIP_CONSTRAINT. Where such
a file caps torch below the release wanted (say `torch<=2.14.1` when 2.15.0
is wanted), pip is run for that release without its configuration files
(PIP_CONFIG_FILE=os.devnull) and without PIP_CONSTRAINT; everywhere else it
is run as configured. Used by `tools.versions` and `tools.wheel_facts`.
"""
import os
import re
import subprocess
import sys

from tools.book import version_tuple
from tools.uv_setup import constraint_files

SPECIFIER = re.compile(r"(===|==|!=|~=|<=|>=|<|>)\s*([0-9][0-9A-Za-z.*+!_-]*)")


def allows(specifiers, version):
    """Whether `version` ('2.15.0') satisfies `specifiers` ('<=2.14.1,>=2')."""
    wanted = version_tuple(version)
    for operator, bound in SPECIFIER.findall(specifiers):
        if bound.endswith(".*"):
            prefix = version_tuple(bound[:-2])
            same = wanted[:len(prefix)] == prefix
            if (operator == "==" and not same) or (operator == "!=" and same):
                return False
            continue
        limit = version_tuple(bound)
        width = max(len(wanted), len(limit))
        here, there = (v + (0,) * (width - len(v)) for v in (wanted, limit))
        ok = {"<": here < there, "<=": here <= there, ">": here > there,
              ">=": here >= there, "==": here == there, "===": here == there,
              "!=": here != there,
              "~=": here >= there and here[:len(limit) - 1] == there[:len(limit) - 1],
              }[operator]
        if not ok:
            return False
    return True


def torch_excluded(release, constraints):
    """The first `torch` line of `constraints` (a constraints file's text)
    that `release` does not satisfy, or None."""
    for line in constraints.splitlines():
        line = line.split("#")[0].split(";")[0].strip()
        match = re.fullmatch(r"torch\s*(\[[^\]]*\])?\s*([<>=!~].*)", line, re.I)
        if match and not allows(match[2], release):
            return line
    return None


def pip_config_list(python=sys.executable, environ=None):
    """The output of `python -m pip config list` ('' where pip cannot say)."""
    done = subprocess.run([str(python), "-m", "pip", "config", "list"],
                          capture_output=True, text=True,
                          env=dict(os.environ if environ is None else environ))
    return done.stdout if done.returncode == 0 else ""


def torch_cap(release, python=sys.executable, environ=None):
    """(constraints file, line) of pip's configuration that keeps torch
    `release` out, or None."""
    environ = dict(os.environ if environ is None else environ)
    for path in constraint_files(pip_config_list(python, environ), environ):
        if path.is_file():
            line = torch_excluded(release, path.read_text())
            if line:
                return path, line
    return None


def pip_environment(release, python=sys.executable, environ=None):
    """The environment to run pip in for torch `release`: `environ` (default
    os.environ) as it is, or, where pip's configuration caps torch below
    `release`, without pip's configuration files and PIP_CONSTRAINT."""
    env = dict(os.environ if environ is None else environ)
    cap = torch_cap(release, python, env)
    if cap:
        path, line = cap
        print(f"pip's configuration has `{line}` ({path}): pip runs for torch "
              f"{release} without its configuration", file=sys.stderr, flush=True)
        env["PIP_CONFIG_FILE"] = os.devnull
        env.pop("PIP_CONSTRAINT", None)
    return env

"""Every check CI runs, as nox sessions: ``nox -s tests lint typecheck bench``.

``tests`` runs on each installed Python among 3.11-3.13. pyenv's shims only answer
for the global version, so the interpreters' own ``bin`` folders are put first on
PATH, and missing interpreters are skipped rather than failed (nox fails on them by
default when ``CI`` is set).
"""

from __future__ import annotations

import glob
import os
import subprocess
from pathlib import Path

import nox

PYTHONS = ["3.11", "3.12", "3.13"]

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.error_on_missing_interpreters = False
nox.options.reuse_venv = "yes"


def _pyenv_root() -> Path:
    root = os.environ.get("PYENV_ROOT")
    if root:
        return Path(root)
    try:
        out = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return Path.home() / ".pyenv"
    return Path(out.stdout.strip())


def _put_pyenv_interpreters_on_path() -> None:
    folders = []
    for version in PYTHONS:
        found = sorted(glob.glob(str(_pyenv_root() / "versions" / f"{version}.*" / "bin")))
        folders.extend(found[-1:])
    if folders:
        os.environ["PATH"] = os.pathsep.join([*folders, os.environ.get("PATH", "")])


_put_pyenv_interpreters_on_path()


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The test suite on one Python."""
    session.install("-e", ".[tests]")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(python=PYTHONS[0])
def lint(session: nox.Session) -> None:
    """ruff: lint rules and formatting."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHONS[0])
def typecheck(session: nox.Session) -> None:
    """Mypy --strict over the package, the tests and the benchmarks."""
    session.install("-e", ".[typecheck,tests]")
    session.run("mypy")


@nox.session(python=PYTHONS[0])
def bench(session: nox.Session) -> None:
    """The benchmarks, each printing its figures beside a baseline measured in the same run."""
    session.install("-e", ".[tests]")  # benchmarks.chat drives a pty with pexpect
    names = (
        "closeout",
        "stress_sessions",
        "engine",
        "sse",
        "policy",
        "startup",
        "chat",
        "batch",
        "mcp",
    )
    for name in names:
        session.run("python", "-m", f"benchmarks.{name}", *session.posargs)

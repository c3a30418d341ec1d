"""Every check CI runs, as nox sessions: ``nox -s tests lint typecheck bench``.

``tests`` runs on each installed Python among 3.11-3.13. pyenv's shims only answer
for the global version, so the interpreters' own ``bin`` folders are put first on
PATH. A missing interpreter is skipped on a developer's machine and fails the run in CI
(``CI`` set), where .ci/run relies on all three. Each session installs the project and
its PEP 735 dependency group from pyproject.toml (``nox.project.dependency_groups``, so
the venv's own pip need not know ``--group``).
"""

from __future__ import annotations

import glob
import os
import subprocess
from pathlib import Path

import nox

PYTHONS = ["3.11", "3.12", "3.13"]

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.error_on_missing_interpreters = bool(os.environ.get("CI"))
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

PYPROJECT = nox.project.load_toml("pyproject.toml")


def _install(session: nox.Session, group: str) -> None:
    """The project, editable, and one dependency group of pyproject.toml."""
    session.install("-e", ".", *nox.project.dependency_groups(PYPROJECT, group))


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The test suite on one Python."""
    _install(session, "tests")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(python=PYTHONS[0])
def lint(session: nox.Session) -> None:
    """ruff: lint rules and formatting."""
    _install(session, "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHONS[0])
def typecheck(session: nox.Session) -> None:
    """Mypy --strict over the package, the tests and the benchmarks."""
    _install(session, "typecheck")
    session.run("mypy")


@nox.session(python=PYTHONS[0])
def bench(session: nox.Session) -> None:
    """The benchmarks, each printing its figures beside a baseline measured in the same run."""
    _install(session, "tests")  # benchmarks.chat drives a pty with pexpect
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

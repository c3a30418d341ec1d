"""The suite's one marker, ``once``, its own home folder, an empty ``workspace``, and
``sandbox``: each test that takes it runs without the kernel sandbox, then with it.

**The home folder.** Every command penguin runs starts from a login shell's
environment (``bash -l``), and a login shell reads the profile of ``HOME``. The
developer's own profile is not the suite's business, and it can be costly or worse:
pyenv's ``rehash`` alone costs a login shell ~140 ms of CPU, and a login shell killed
while it holds pyenv's lock file leaves that file behind, after which every login shell
on the machine waits 60 s for it. So the suite runs with ``HOME`` set to a fresh folder
of its own, whose ``.profile`` exports the ``PATH`` the run started with (the commands
see the same programs the run does; ``PYENV_ROOT`` is kept pointing at the real pyenv, so
its shims on that ``PATH`` still work). Tests that are about profiles make their own
``HOME``, as before. The folder is removed when the run ends.

**``once``.**
The README's run (Python 3.11, in CI too) runs everything. The nox matrix's other
Pythons skip, with ``-m "not once"``, the tests whose cost is a real browser, a real
pseudo-terminal or cores kept busy on purpose — what they check (a page, a terminal,
delivery under load) does not change with the interpreter, and together they are a
third of the suite's time. ``nox -s tests`` alone runs them on every Python.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import certifi
import pytest

if TYPE_CHECKING:
    import penguin

_REAL_HOME = os.environ.get("HOME") or os.path.expanduser("~")
_HOME = tempfile.mkdtemp(prefix="penguin-tests-home-")
Path(_HOME, ".profile").write_text(f"export PATH={shlex.quote(os.environ.get('PATH', ''))}\n")
if "PYENV_ROOT" not in os.environ and Path(_REAL_HOME, ".pyenv").is_dir():
    os.environ["PYENV_ROOT"] = str(Path(_REAL_HOME, ".pyenv"))
os.environ["HOME"] = _HOME

_ONCE_FILES = {
    "tests/cli/test_chat.py",
    "tests/cli/test_chat_approval.py",
    "tests/server/test_page.py",
    "tests/server/test_page_issue18.py",
    "tests/server/test_reference_web.py",
    "tests/server/test_crash.py",
    "tests/environment/supervisor/test_delivery.py",
}
_ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "once: a browser, pty or load test the CI matrix runs on one Python only"
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty folder, ``ws`` (the test folders below give their own where they differ)."""
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def one_ca(tmp_path: Path) -> Path:
    """A CA file holding one certificate (the first of certifi's bundle)."""
    bundle = Path(certifi.where()).read_text()
    end = "-----END CERTIFICATE-----\n"
    path = tmp_path / "one-ca.pem"
    path.write_text(bundle[bundle.index("-----BEGIN CERTIFICATE-----") : bundle.index(end)] + end)
    return path


@pytest.fixture(params=[False, True], ids=["unsandboxed", "sandboxed"])
def sandbox(request: pytest.FixtureRequest) -> penguin.SandboxPolicy | None:
    """None, then the kernel sandbox's default policy (skipped where it cannot be enforced)."""
    if not request.param:
        return None
    import penguin
    from penguin.environment.sandbox import probe

    reason = probe().reason
    if reason is not None:
        pytest.skip(f"sandbox unavailable here: {reason}")
    return penguin.SandboxPolicy(mode="workspace-write")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_HOME, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            relative = item.path.resolve().relative_to(_ROOT).as_posix()
        except ValueError:
            continue
        if relative in _ONCE_FILES:
            item.add_marker(pytest.mark.once)

"""The suite's one marker: ``once``, for tests CI runs on one Python only.

The README's run (Python 3.11, in CI too) runs everything. The nox matrix's other
Pythons skip, with ``-m "not once"``, the tests whose cost is a real browser, a real
pseudo-terminal or cores kept busy on purpose — what they check (a page, a terminal,
delivery under load) does not change with the interpreter, and together they are a
third of the suite's time. ``nox -s tests`` alone runs them on every Python.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            relative = item.path.resolve().relative_to(_ROOT).as_posix()
        except ValueError:
            continue
        if relative in _ONCE_FILES:
            item.add_marker(pytest.mark.once)

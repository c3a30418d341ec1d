"""Fixtures of the MCP tests: the HTTP server, shared per module (it starts in ~1 s)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import HttpServer, http_server


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """The test server over Streamable HTTP on 127.0.0.1."""
    with http_server(tmp_path_factory.mktemp("http")) as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path

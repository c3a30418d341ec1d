"""The process's TLS contexts (``penguin._tls``): made once per kind and trust setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from penguin import _tls
from penguin._tls import shared_tls_context
from penguin.environment.mcp._connection import remote_tls_context


async def test_20_1_penguin_s_own_tls_context_is_made_once_per_trust_setting(
    one_ca: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As httpx makes its default: SSL_CERT_FILE when set, else certifi's bundle."""
    monkeypatch.setattr(_tls, "_CONTEXTS", {})
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    certifi_context = await shared_tls_context()
    assert await shared_tls_context() is certifi_context
    assert certifi_context.cert_store_stats()["x509_ca"] > 1
    monkeypatch.setenv("SSL_CERT_FILE", str(one_ca))
    own = await shared_tls_context()
    assert own.cert_store_stats()["x509_ca"] == 1  # the file the variable names, and only it
    assert await shared_tls_context() is own
    monkeypatch.delenv("SSL_CERT_FILE")
    assert await shared_tls_context() is certifi_context


async def test_20_1_the_two_kinds_of_context_are_kept_apart(
    one_ca: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remote MCP connection's (the system's store) is never penguin's (certifi's)."""
    monkeypatch.setattr(_tls, "_CONTEXTS", {})
    monkeypatch.setenv("SSL_CERT_FILE", str(one_ca))
    mcp = await remote_tls_context()
    own = await shared_tls_context()
    assert mcp is not own
    assert len(_tls._CONTEXTS) == 2
    assert await remote_tls_context() is mcp
    assert await shared_tls_context() is own

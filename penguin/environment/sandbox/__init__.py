"""The sandbox: what a session's tools can reach once they run (spec/sandbox.md).

A plug-in folder with three parts:

- ``_policy``: :class:`SandboxPolicy` and its resolution into writable roots and
  protected paths (sans-IO apart from looking at paths), and the file tools' check;
- ``_linux``: the kernel-facing part (namespaces made with ``bwrap``, commands started
  in them by the spawner or entered with ``nsenter``), and :func:`probe` of what the
  machine supports;
- ``_spawner``: the small process inside the namespaces that starts their commands;
- ``_runtime``: :class:`CommandSandbox`, one Environment's sandbox.

docs/sandbox.md describes the modes and the mechanism.
"""

from __future__ import annotations

from penguin._errors import SandboxUnavailableError

from ._linux import Support, landlock_abi, probe, probed
from ._policy import (
    MODES,
    Layout,
    SandboxMode,
    SandboxPolicy,
    policy_from_mapping,
    recorded_policy,
    resolve_layout,
)
from ._runtime import TMP_DIR_NAME, CommandSandbox, close_sandbox, open_sandbox

__all__ = [
    "MODES",
    "TMP_DIR_NAME",
    "CommandSandbox",
    "Layout",
    "SandboxMode",
    "SandboxPolicy",
    "SandboxUnavailableError",
    "Support",
    "close_sandbox",
    "landlock_abi",
    "open_sandbox",
    "policy_from_mapping",
    "probe",
    "probed",
    "recorded_policy",
    "refusal",
    "resolve_layout",
    "warning",
]


def refusal(reason: str) -> str:
    """X3.1's text when a chosen mode cannot be enforced."""
    return f"sandbox unavailable: {reason}; use --sandbox off to run without it"


def warning(reason: str) -> str:
    """X3.1's warning when only the default asked for a sandbox."""
    return f"penguin: sandbox unavailable: {reason}; running without it"

"""What a sandbox policy means on disk: the writable roots and protected paths, resolved.

Owns :class:`SandboxPolicy` (the user's words: a mode, the network switch, extra roots,
protected paths) and :class:`Layout` (those words resolved against one session's
workspace, scratchpad and data root at one moment: absolute, symlink-free paths that
exist), and the file tools' write check with spec/sandbox.md X2.2's texts.

Nothing here starts a process or changes a file: :func:`resolve_layout` only looks
(paths resolved through ``O_PATH`` descriptors, ``stat``, ``listdir`` of the data
root), so it is cheap enough to run at every command start and every file-tool call,
and the kernel-facing part (``_linux``) only turns a :class:`Layout` into mounts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias, final

import attrs

from penguin._realpath import realpath, resolved

__all__ = [
    "MODES",
    "Layout",
    "SandboxMode",
    "SandboxPolicy",
    "policy_from_mapping",
    "recorded_policy",
    "resolve_layout",
    "write_denial",
]

SandboxMode: TypeAlias = Literal["off", "read-only", "workspace-write"]
MODES: Final[tuple[SandboxMode, ...]] = ("off", "read-only", "workspace-write")

DEVICES: Final = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
"""Writable in both sandboxed modes (X1.2), besides the session's own pty."""

_DATA_ROOT_FILES: Final = (".project_config.toml",)
_AGENT_FILES: Final = ("agent_state", "traces")


def _paths(value: Iterable[str | os.PathLike[str]] | str | os.PathLike[str]) -> tuple[str, ...]:
    if isinstance(value, (str, os.PathLike)):
        value = (value,)
    out = tuple(os.fspath(item) for item in value)
    for item in out:
        if not item:
            raise ValueError("a sandbox path must not be empty")
    return out


def _mode(value: object) -> SandboxMode:
    if value not in MODES:
        raise ValueError(f"sandbox mode must be one of {', '.join(MODES)}, got {value!r}")
    return value


@final
@attrs.frozen
class SandboxPolicy:
    """What a session's tools may reach once they run (spec/sandbox.md X1).

    ``mode`` is ``off``, ``read-only`` or ``workspace-write``; ``network`` ``None`` or
    ``True`` is on, ``False`` off (also in ``off``: network isolation alone).
    ``writable_roots`` and ``protected`` are absolute or workspace-relative; one that
    does not exist yet counts from the first command after it appears.
    """

    mode: SandboxMode = attrs.field(converter=_mode)
    network: bool | None = None
    writable_roots: tuple[str, ...] = attrs.field(default=(), converter=_paths)
    writable_tmp: bool = True
    protected: tuple[str, ...] = attrs.field(default=(), converter=_paths)
    data_root: str | None = attrs.field(default=None, kw_only=True)
    """Where penguin's own files are, kept read-only (``None``: ``$PENGUIN_HOME`` or
    ``~/.penguin/data``); an Agent sets its own."""

    @property
    def network_on(self) -> bool:
        """Whether commands may reach the network (``None`` means on)."""
        return self.network is not False

    @property
    def enforced(self) -> bool:
        """Whether the kernel has anything to enforce (a sandboxed mode, or network off)."""
        return self.mode != "off" or not self.network_on

    def summary(self) -> dict[str, object]:
        """The trace's record of it (X1.4): ``{"mode": M, "network": B}``."""
        return {"mode": self.mode, "network": self.network_on}

    def describe(self) -> str:
        """``workspace-write, network on``: what the run line and the chat header say."""
        return f"{self.mode}, network {'on' if self.network_on else 'off'}"


@final
@attrs.frozen
class Layout:
    """A policy resolved at one moment: what the mounts of the next command are.

    Every path is absolute, free of symlinks and ``..``, and existed when resolved.
    ``writable`` is sorted shallow first, then ``protected`` (applied after it, so a
    protected path inside a writable root stays read-only).
    """

    mode: SandboxMode
    network: bool
    writable: tuple[str, ...]
    protected: tuple[str, ...]
    shm: bool
    """Whether ``/dev/shm`` is writable (workspace-write only)."""

    @property
    def key(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """What must be the same for two commands to share one set of namespaces."""
        return (self.writable, self.protected)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _joined(path: str, workspace: str) -> str:
    return os.path.join(workspace, os.path.expanduser(path))


def _git_paths(workspace: str) -> list[str]:
    """``.git`` of the workspace: the folder; or the file and the ``gitdir:`` it names."""
    git = os.path.join(workspace, ".git")
    if os.path.isdir(git):
        return [git]
    if not os.path.isfile(git):
        return []
    found = [git]
    try:
        with open(git, encoding="utf-8", errors="replace") as handle:
            first = handle.readline(4096).strip()
    except OSError:
        return found
    if first.startswith("gitdir:"):
        target = first[len("gitdir:") :].strip()
        if target:
            found.append(os.path.join(workspace, target))
    return found


def _data_root_files(data_root: str) -> list[str]:
    """Penguin's own files in the data root (not the workspaces and scratchpads)."""
    found: list[str] = []
    try:
        projects = os.listdir(data_root)
    except OSError:
        return found
    for name in projects:
        project = os.path.join(data_root, name)
        if not os.path.isdir(project):
            found.append(project)  # the server index, and any other file of penguin's
            continue
        found.extend(os.path.join(project, item) for item in _DATA_ROOT_FILES)
        agents = os.path.join(project, "agents")
        try:
            agent_names = os.listdir(agents)
        except OSError:
            continue
        for agent in agent_names:
            found.extend(os.path.join(agents, agent, item) for item in _AGENT_FILES)
    return found


def resolve_layout(
    policy: SandboxPolicy,
    *,
    workspace: str | os.PathLike[str],
    scratchpad: str | os.PathLike[str] | None,
    tmpdir: str | os.PathLike[str] | None,
    home: str | None,
    data_root: str | os.PathLike[str] | None,
) -> Layout:
    """The writable roots and protected paths of ``policy`` right now (X1.2).

    Relative paths resolve against ``workspace``; symlinks and ``..`` are resolved, and
    paths that do not exist are left out (they count once they exist).
    """
    ws = realpath(os.fspath(workspace))
    writable: list[str] = []
    protected: list[str] = []
    if policy.mode == "workspace-write":
        candidates: list[str] = [ws]
        candidates.extend(os.fspath(p) for p in (scratchpad, tmpdir) if p is not None)
        if policy.writable_tmp:
            candidates.append("/tmp")
        if home:
            candidates.append(os.path.join(home, ".cache"))
        candidates.extend(policy.writable_roots)
        writable = _existing(_joined(c, ws) for c in candidates)
        guarded: list[str] = [*_git_paths(ws), os.path.join(ws, ".penguin")]
        if data_root is not None:
            root = realpath(os.fspath(data_root))
            if any(_within(root, w) or _within(w, root) for w in writable):
                guarded.extend(_data_root_files(root))
        guarded.extend(policy.protected)
        protected = [
            p
            for p in _existing(_joined(g, ws) for g in guarded)
            if any(_within(p, w) for w in writable)
        ]
    return Layout(
        mode=policy.mode,
        network=policy.network_on,
        writable=_ordered(writable),
        protected=_ordered(protected),
        shm=policy.mode == "workspace-write",
    )


def _existing(paths: Iterable[str]) -> list[str]:
    """The resolved ``paths`` (:func:`~penguin._realpath.resolved`) that exist, each once."""
    found = (resolved(p) for p in dict.fromkeys(paths))
    return list(dict.fromkeys(p for p in found if p is not None))


def _ordered(paths: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted(dict.fromkeys(paths), key=lambda p: (p.count("/"), p)))


def write_denial(file_path: str, resolved: str, layout: Layout) -> str | None:
    """X2.2's text when a file tool may not write ``resolved``; ``None`` when it may.

    ``resolved`` is the tool's absolute path; its symlinks and ``..`` are resolved here
    (the deepest existing ancestor, for a file that does not exist yet).
    """
    if layout.mode == "off":
        return None
    target = realpath(resolved)
    for root in reversed(layout.protected):
        if _within(target, root):
            return f'Cannot write "{file_path}": protected by the sandbox ({root}).'
    if layout.mode == "read-only" or not any(_within(target, w) for w in layout.writable):
        return f'Cannot write "{file_path}": outside the sandbox\'s writable roots ({layout.mode}).'
    return None


def policy_from_mapping(value: object, *, where: str) -> SandboxPolicy:
    """A policy from a project file's ``[sandbox]`` table or a task line's object.

    Raises ``ValueError`` naming ``where`` and the key at fault.
    """
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a table/object, got {type(value).__name__}")
    known = {"mode", "network", "writable_roots", "writable_tmp", "protected"}
    for key in value:
        if key not in known:
            raise ValueError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(known))})")
    mode = value.get("mode", "workspace-write")
    if mode not in MODES:
        raise ValueError(f"{where}.mode must be one of {', '.join(MODES)}, got {mode!r}")
    network = value.get("network")
    if network is not None and not isinstance(network, bool):
        raise ValueError(f"{where}.network must be true or false, got {network!r}")
    tmp = value.get("writable_tmp", True)
    if not isinstance(tmp, bool):
        raise ValueError(f"{where}.writable_tmp must be true or false, got {tmp!r}")
    lists: dict[str, tuple[str, ...]] = {}
    for key in ("writable_roots", "protected"):
        items = value.get(key, [])
        if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
            raise ValueError(f"{where}.{key} must be a list of non-empty paths")
        lists[key] = tuple(items)
    return SandboxPolicy(
        mode=mode,
        network=network,
        writable_roots=lists["writable_roots"],
        writable_tmp=tmp,
        protected=lists["protected"],
    )


def recorded_policy(
    recorded: Mapping[str, Any] | None, project: SandboxPolicy | None
) -> SandboxPolicy | None:
    """The policy a trace's ``session_meta`` records, over the project's other fields."""
    if not recorded or recorded.get("mode") not in MODES:
        return None
    network = recorded.get("network")
    base = project if project is not None else SandboxPolicy(mode="off")
    return attrs.evolve(
        base, mode=recorded["mode"], network=network if isinstance(network, bool) else None
    )

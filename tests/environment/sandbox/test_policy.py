"""The policy's resolution and the file tools' check (spec/sandbox.md X1.2, X2.2), sans kernel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import penguin
from penguin._realpath import realpath, resolved
from penguin.environment.sandbox import SandboxPolicy, policy_from_mapping, resolve_layout
from penguin.environment.sandbox._policy import write_denial


def layout_of(policy: SandboxPolicy, ws: Path, **kw: object) -> penguin.environment.sandbox.Layout:
    args: dict[str, object] = {"scratchpad": None, "tmpdir": None, "home": None, "data_root": None}
    args.update(kw)
    return resolve_layout(policy, workspace=ws, **args)  # type: ignore[arg-type]


def test_x1_1_modes_and_network_default_on() -> None:
    policy = SandboxPolicy(mode="workspace-write")
    assert policy.network_on
    assert policy.enforced
    assert SandboxPolicy(mode="off").enforced is False
    assert SandboxPolicy(mode="off", network=False).enforced is True  # network isolation alone
    assert policy.summary() == {"mode": "workspace-write", "network": True}
    assert SandboxPolicy(mode="read-only", network=False).describe() == "read-only, network off"
    with pytest.raises(ValueError, match="sandbox mode must be one of"):
        SandboxPolicy(mode="full")


def test_x1_2_writable_roots_resolved_existing_and_relative(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "build").mkdir(parents=True)
    (ws / ".git").mkdir()
    (ws / ".penguin").mkdir()
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    policy = SandboxPolicy(
        mode="workspace-write",
        writable_tmp=False,
        writable_roots=("build", str(tmp_path / "later")),
        protected=("build/keep",),
    )
    layout = layout_of(policy, ws, home=str(home))
    assert set(layout.writable) == {str(ws), str(home / ".cache"), str(ws / "build")}
    assert set(layout.protected) == {str(ws / ".git"), str(ws / ".penguin")}
    (tmp_path / "later").mkdir()
    (ws / "build" / "keep").mkdir()
    later = layout_of(policy, ws, home=str(home))
    assert str(tmp_path / "later") in later.writable  # one that appears counts from then on
    assert str(ws / "build" / "keep") in later.protected
    assert "/tmp" in layout_of(SandboxPolicy(mode="workspace-write"), ws).writable


def test_x1_2_git_file_protects_the_file_and_its_gitdir(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    gitdir = ws / "inner-gitdir"
    gitdir.mkdir()
    (ws / ".git").write_text(f"gitdir: {gitdir.name}\n")
    layout = layout_of(SandboxPolicy(mode="workspace-write", writable_tmp=False), ws)
    assert set(layout.protected) == {str(ws / ".git"), str(gitdir)}


def test_x1_2_data_root_files_protected_inside_a_writable_root(tmp_path: Path) -> None:
    root = tmp_path / "data"
    agent = penguin.Agent.open(root)
    (agent.paths.traces_dir).mkdir(parents=True, exist_ok=True)
    ws = agent.paths.workspaces_dir / "tmp-1"
    ws.mkdir(parents=True)
    policy = SandboxPolicy(mode="workspace-write", writable_roots=(str(root),), writable_tmp=False)
    layout = layout_of(policy, ws, data_root=str(root))
    assert str(agent.paths.agent_state) in layout.protected
    assert str(agent.paths.traces_dir) in layout.protected
    assert not any(p == str(ws) or str(ws).startswith(p + "/") for p in layout.protected)


def test_x1_2_read_only_has_no_writable_root(tmp_path: Path) -> None:
    layout = layout_of(SandboxPolicy(mode="read-only"), tmp_path)
    assert layout.writable == ()
    assert layout.protected == ()
    assert not layout.shm


def test_x2_2_texts_with_symlinks_and_dotdot_resolved(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, ws / "link")
    layout = layout_of(SandboxPolicy(mode="workspace-write", writable_tmp=False), ws)
    assert write_denial("a.txt", str(ws / "a.txt"), layout) is None
    assert write_denial("new/dir/a.txt", str(ws / "new/dir/a.txt"), layout) is None
    out = 'Cannot write "link/x": outside the sandbox\'s writable roots (workspace-write).'
    assert write_denial("link/x", str(ws / "link/x"), layout) == out
    dotdot = "sub/../../outside/x"
    assert write_denial(dotdot, os.path.join(ws, dotdot), layout) == (
        f'Cannot write "{dotdot}": outside the sandbox\'s writable roots (workspace-write).'
    )
    assert write_denial(".git/config", str(ws / ".git/config"), layout) == (
        f'Cannot write ".git/config": protected by the sandbox ({ws / ".git"}).'
    )
    read_only = layout_of(SandboxPolicy(mode="read-only"), ws)
    assert write_denial("a.txt", str(ws / "a.txt"), read_only) == (
        'Cannot write "a.txt": outside the sandbox\'s writable roots (read-only).'
    )


def test_x1_3_project_table_is_checked() -> None:
    policy = policy_from_mapping(
        {"mode": "read-only", "network": False, "protected": ["secrets"]}, where="[sandbox]"
    )
    assert (policy.mode, policy.network, policy.protected) == ("read-only", False, ("secrets",))
    with pytest.raises(ValueError, match=r"\[sandbox\]: unknown key 'modes'"):
        policy_from_mapping({"modes": "x"}, where="[sandbox]")
    with pytest.raises(ValueError, match=r"\[sandbox\].network must be true or false"):
        policy_from_mapping({"network": "no"}, where="[sandbox]")


def test_x1_2_a_path_is_resolved_as_realpath_then_lexists_say(tmp_path: Path) -> None:
    # The layout resolves every path at each command start through a descriptor of it
    # (penguin._realpath.resolved); what it gives must be what realpath and lexists
    # give, and penguin._realpath.realpath (the file tools' and the write check's) must
    # give what os.path.realpath gives, for a file about to be created too.
    (tmp_path / "dir" / "sub").mkdir(parents=True)
    (tmp_path / "file").write_text("x")
    (tmp_path / "to-file").symlink_to(tmp_path / "file")
    (tmp_path / "to-dir").symlink_to("dir")
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    (tmp_path / "to-dangling").symlink_to("dangling")
    (tmp_path / "dir" / "odd name (deleted)").write_text("x")
    names = [
        "file",
        "to-file",
        "to-dir",
        "to-dir/sub",
        "to-dir/sub/..",
        "to-dir/../file",
        "dir/sub/../../to-file",
        "dangling",
        "to-dangling",
        "loop-a",
        "loop-a/x",
        "missing",
        "missing/deeper",
        "file/not-a-dir",
        "dir/odd name (deleted)",
        ".",
        "dir/new-file",
        "to-dir/new-file",
        "to-dir/sub/new-file",
        "dir/sub/../new-file",
        "missing/new-file",
        "dangling/new-file",
        "to-file/new-file",
        "loop-a/new-file",
    ]
    for name in names:
        path = os.path.join(tmp_path, name)
        real = os.path.realpath(path)
        expected = real if os.path.lexists(real) else None
        assert resolved(path) == expected, name
        assert realpath(path) == real, name

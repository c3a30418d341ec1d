"""One exception tree (issue 10 item 4): every exception penguin defines is a PenguinError.

The root is :class:`penguin.PenguinError`; each class keeps the builtin base it had
(``except ValueError`` and friends still catch), each keeps the import paths it had,
and the whole tree is drawn once, in ``penguin/_errors.py``'s docstring.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import penguin
from penguin import protocol as om
from penguin._errors import PenguinError


def _modules() -> list[ModuleType]:
    names = [info.name for info in pkgutil.walk_packages(penguin.__path__, "penguin.")]
    return [penguin, *(importlib.import_module(name) for name in names)]


def _defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined (not just imported) in a module under penguin/."""
    found: dict[str, type[BaseException]] = {}
    for module in _modules():
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
            ):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


# The classes issue 10 counted, by name: the walk must find them all (it is not vacuous).
_COUNTED = {
    "ApprovalModeError",
    "ConfigError",
    "DuplicateSessionError",
    "EmptyImageError",
    "EngineBusyError",
    "EnvironmentClosedError",
    "ImageDownloadError",
    "ImageError",
    "ImageReadError",
    "ImageTooLargeError",
    "LLMStreamError",
    "MalformedTraceError",
    "PolicyPatternError",
    "ProtocolError",
    "SessionNotFoundError",
    "SpawnError",
    "SubagentSpawnError",
    "SubagentSupervisorClosedError",
    "SupervisorClosedError",
    "TraceAppendError",
    "TraceError",
    "UnsupportedImageError",
    "WorkspaceError",
    "_DumpTooLarge",
    "_NotRegularError",
    "_UsageError",
}


def test_10_4_every_exception_class_under_penguin_is_a_penguin_error() -> None:
    found = _defined_exceptions()
    names = {cls.__name__ for cls in found.values()}
    assert names >= _COUNTED, f"the walk missed {sorted(_COUNTED - names)}"
    outside = sorted(name for name, cls in found.items() if not issubclass(cls, PenguinError))
    assert outside == [], f"not under penguin.PenguinError: {outside}"


def test_10_4_the_root_is_exported_and_is_a_plain_exception() -> None:
    assert "PenguinError" in penguin.__all__
    assert penguin.PenguinError is PenguinError
    assert PenguinError.__bases__ == (Exception,)


def test_10_4_the_whole_tree_is_drawn_once_in_the_root_module() -> None:
    import penguin._errors as root

    drawing = root.__doc__ or ""
    public = sorted(
        cls.__name__
        for cls in _defined_exceptions().values()
        if not cls.__name__.startswith("_") and cls is not PenguinError
    )
    missing = [name for name in public if name not in drawing]
    assert missing == [], f"penguin/_errors.py's docstring does not draw {missing}"


def test_10_4_each_package_draws_its_own_subtree() -> None:
    for cls in _defined_exceptions().values():
        if cls.__name__.startswith("_") or cls is PenguinError:
            continue
        module = importlib.import_module(cls.__module__)
        assert cls.__name__ in (module.__doc__ or ""), f"{cls.__module__} does not draw {cls}"


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (om.ProtocolError, ValueError),
        (penguin.config.ConfigError, ValueError),
        (penguin.approval.ApprovalModeError, ValueError),
        (penguin.approval.PolicyPatternError, ValueError),
        (penguin.trace.MalformedTraceError, ValueError),
        (penguin.trace.TraceAppendError, OSError),
        (penguin.WorkspaceError, ValueError),
        (penguin.EnvironmentClosedError, RuntimeError),
        (penguin.engine.EngineBusyError, RuntimeError),
        (penguin.SessionNotFoundError, LookupError),
        (penguin.environment.supervisor.SupervisorClosedError, Exception),
    ],
    ids=lambda value: value.__name__,
)
def test_10_4_each_class_keeps_its_builtin_base(
    cls: type[BaseException], builtin: type[BaseException]
) -> None:
    assert issubclass(cls, builtin)
    assert issubclass(cls, PenguinError)


def test_10_4_every_name_stays_importable_from_where_it_was() -> None:
    from penguin import agent
    from penguin.environment import _errors as env_errors
    from penguin.environment import supervisor
    from penguin.environment.supervisor import _commands, _registry, _subagents

    assert agent.SessionNotFoundError is penguin.SessionNotFoundError
    assert _commands.SpawnError is supervisor.SpawnError is env_errors.SpawnError
    assert _commands.SupervisorClosedError is supervisor.SupervisorClosedError
    assert _registry.DuplicateSessionError is env_errors.DuplicateSessionError
    assert _subagents.SubagentStartError is supervisor.SubagentStartError
    assert _subagents.SubagentSupervisorClosedError is supervisor.SubagentSupervisorClosedError
    assert penguin.environment.SubagentSpawnError is env_errors.SubagentSpawnError
    for module in (agent, _commands, _registry, _subagents):
        for name in module.__all__:
            assert hasattr(module, name)


def test_10_4_the_two_subagent_synonyms_are_one_class() -> None:
    from penguin.environment import SubagentSpawnError, SubagentStartError
    from penguin.environment.supervisor import SubagentSupervisorClosedError

    assert SubagentStartError is SubagentSpawnError
    assert SubagentSpawnError.__name__ == "SubagentSpawnError"  # the name a model may see
    closed = SubagentSupervisorClosedError()
    assert isinstance(closed, SubagentStartError)
    assert str(closed) == "subagent session manager disposed"


# ------------------------------------------------------------------ existing except sites


async def test_10_4_a_missing_workspace_is_still_a_value_error(tmp_path: Path) -> None:
    config = penguin.EnvironmentConfig(workspace_dir=tmp_path / "missing", tools=[])
    with pytest.raises(ValueError, match="does not exist") as caught:
        async with penguin.Environment.open(config):
            pass  # pragma: no cover
    assert isinstance(caught.value, penguin.PenguinError)
    assert caught.value.path == tmp_path / "missing"  # type: ignore[attr-defined]


async def test_10_4_a_closed_environment_is_still_a_runtime_error(tmp_path: Path) -> None:
    config = penguin.EnvironmentConfig(workspace_dir=tmp_path, tools=None)
    async with penguin.Environment.open(config) as env:
        pass
    call = om.tool_call("read_file", {"file_path": "x"}, "c1")
    with pytest.raises(RuntimeError) as caught:
        await env.call_tool(call)
    assert isinstance(caught.value, penguin.EnvironmentClosedError)


async def test_10_4_an_unknown_session_is_still_a_lookup_error(tmp_path: Path) -> None:
    agent = penguin.Agent.open(tmp_path)
    with pytest.raises(LookupError, match="no trace of session") as caught:
        async with agent.resume_session("session-2026-01-02-03-04-05-0000abcd"):
            pass  # pragma: no cover
    assert isinstance(caught.value, penguin.SessionNotFoundError)


def test_10_4_bad_input_is_still_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\$") as protocol:
        om.loads('{"type": "nonsense"}')
    with pytest.raises(ValueError, match="Invalid approval mode") as mode:
        penguin.approval.parse_approval_mode("sometimes")
    broken = tmp_path / "system_config.yaml"
    broken.write_text("tools: [\n")
    with pytest.raises(ValueError, match=r"system_config\.yaml") as config:
        penguin.config.load_system_config(broken)
    for caught in (protocol, mode, config):
        assert isinstance(caught.value, PenguinError)


def test_10_4_a_strict_trace_read_still_raises_a_value_error(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text("not json\n" + om.dumps(om.user_text("hi")) + "\n")
    with pytest.raises(ValueError, match="not an OmniMessage") as caught:
        penguin.trace.read_trace(trace, strict=True)
    assert isinstance(caught.value, penguin.trace.TraceError)
    assert isinstance(caught.value, PenguinError)

"""Drive the file tools directly through a real ToolContext (no Environment)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from penguin.config import ToolDefinitionConfig
from penguin.environment import Tool, ToolContext, ToolResult, ToolServices
from penguin.environment.tools.edit_file import EditFileTool
from penguin.environment.tools.read_file import ReadFileTool
from penguin.environment.tools.write_file import WriteFileTool
from penguin.protocol import OmniMessage, Payload


@attrs.frozen
class Run:
    """What one call produced: every emitted delta and the returned result."""

    deltas: tuple[str, ...]
    result: ToolResult | None

    @property
    def text(self) -> str:
        return "".join(self.deltas)

    @property
    def stop(self) -> str:
        if self.result is None or self.result.stop_reason is None:
            return "completed"
        return self.result.stop_reason


Runner = Callable[..., Awaitable[Run]]

LIMITS = {"read_file": 64000, "edit_file": 16000, "write_file": 16000}
FACTORIES: dict[str, Callable[[ToolDefinitionConfig, ToolServices], Tool]] = {
    "read_file": ReadFileTool,
    "edit_file": EditFileTool,
    "write_file": WriteFileTool,
}


def make_context(workspace: Path, definition: ToolDefinitionConfig, sink: list[str]) -> ToolContext:
    async def emit(text: str) -> None:
        if text:
            sink.append(text)

    async def forward(message: OmniMessage[Payload]) -> None:
        pytest.fail(f"a file tool forwarded a message: {message!r}")

    return ToolContext(
        workspace_dir=workspace,
        tool_call_id="call_1",
        definition=definition,
        approve=None,
        emit=emit,
        forward=forward,
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def _runner(tool_name: str, workspace: Path) -> Runner:
    async def run(
        args: dict[str, Any] | None = None,
        /,
        *,
        max_output_length: int | None = None,
        name: str = tool_name,
        **kwargs: Any,
    ) -> Run:
        definition = ToolDefinitionConfig(
            name=name,
            description="test",
            max_output_length=LIMITS[tool_name] if max_output_length is None else max_output_length,
        )
        tool = FACTORIES[tool_name](definition, ToolServices())
        sink: list[str] = []
        result = await tool.execute(
            {**(args or {}), **kwargs}, make_context(workspace, definition, sink)
        )
        return Run(tuple(sink), result)

    return run


@pytest.fixture
def read_file(workspace: Path) -> Runner:
    return _runner("read_file", workspace)


@pytest.fixture
def edit_file(workspace: Path) -> Runner:
    return _runner("edit_file", workspace)


@pytest.fixture
def write_file(workspace: Path) -> Runner:
    return _runner("write_file", workspace)

"""Reference 1.12: the engine's safety net when the Environment itself fails a call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

import penguin
from penguin import protocol as om
from penguin.environment import ToolContext, ToolResult
from penguin.llm import ScriptedLLM, tool_call, turn

from .support import Message, allow_all, kind, open_harness, run_task


class BrokenDefinition:
    """A custom tool whose definition cannot be read once ``broken`` is set.

    The Environment reads it when a call starts, after the ``start`` frame: its
    stream then raises before the complete output — the case 1.12 covers.
    """

    name = "brittle"

    def __init__(self) -> None:
        self.broken = False

    @property
    def definition(self) -> penguin.ToolDefinitionConfig:
        if self.broken:
            raise RuntimeError("definition unavailable")
        return penguin.ToolDefinitionConfig(name="brittle", description="breaks")

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        raise AssertionError("never runs")  # pragma: no cover


def outputs(messages: list[Message]) -> list[om.ToolCallOutputPayload]:
    return [m.payload for m in messages if isinstance(m.payload, om.ToolCallOutputPayload)]


async def test_an_environment_raising_before_the_output_becomes_a_tool_error(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    brittle = BrokenDefinition()
    llm = ScriptedLLM([turn(tool_call("brittle", {}, "c1"), tool_call("probe", {}, "c2")), "ok"])
    async with open_harness(tmp_path, llm, custom_tools=[brittle]) as h:
        brittle.broken = True
        seen, result = await run_task(h.engine, "go", approve=allow_all)
        records = await h.trace()
    assert result.status == "completed"
    failed = [o for o in outputs(seen) if o.tool_call_id == "c1"]
    assert failed == [
        om.ToolCallOutputPayload(
            output="[tool error] definition unavailable", tool_call_id="c1", stop_reason="failed"
        )
    ]
    # The other call is unaffected, and the model gets both results in call order.
    sent = outputs(list(llm.requests[1].messages))
    assert [(o.tool_call_id, o.stop_reason) for o in sent] == [
        ("c1", "failed"),
        ("c2", "completed"),
    ]
    assert [o.tool_call_id for o in outputs(records)].count("c1") == 1
    about = [kind(m) for m in seen if getattr(m.payload, "tool_call_id", None) == "c1"]
    assert about[-1] == "tool_call_output"
    assert "partial_tool_call_output:stop" not in about  # the Environment never got that far


async def test_a_raising_tool_is_closed_out_by_the_environment(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    llm = ScriptedLLM([turn(tool_call("probe", {"raise": "boom"}, "c1")), "ok"])
    async with open_harness(tmp_path, llm) as h:
        seen, _ = await run_task(h.engine, "go", approve=allow_all)
    (output,) = outputs(seen)
    assert (output.output, output.stop_reason) == ("[tool error] boom", "failed")
    assert "partial_tool_call_output:stop" in [kind(m) for m in seen]

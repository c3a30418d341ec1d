"""The engine asks only a ToolRunner of its tools' side (issue 10 item 3).

``penguin.Environment`` satisfies the protocol as it is (checked by mypy, which reads
this file), and any other object with the two methods drives the engine just as well.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import trio

import penguin
from penguin import protocol as om
from penguin.engine import Engine, ToolRunner
from penguin.llm import ScriptedLLM, tool_call, turn

from .support import allow_all, run_task, texts

Message = om.OmniMessage[om.Payload]


@attrs.frozen
class Notice:
    text_: str

    def text(self) -> str:
        return self.text_


@attrs.define
class EchoRunner:
    """Answers every call with its arguments; one background notice after the first call."""

    calls: list[str] = attrs.Factory(list)
    notices: list[Notice] = attrs.Factory(list)

    async def run_call(
        self,
        call: om.OmniMessage[om.ToolCallPayload],
        emit: Callable[[Message], Awaitable[None]],
        *,
        interrupt: trio.Event | None = None,
        approve: om.ApproveFn | None = None,
    ) -> None:
        call_id = call.payload.tool_call_id
        self.calls.append(call_id)
        await emit(om.tool_call_output(f"echo {call.payload.arguments}", call_id))
        self.notices.append(Notice("[background_task_done]\nthe echo is done"))

    def take_background_reports(self) -> list[Notice]:
        taken, self.notices = self.notices, []
        return taken


async def test_10_3_the_environment_is_a_tool_runner(tmp_path: Path) -> None:
    config = penguin.EnvironmentConfig(workspace_dir=tmp_path, tools=[])
    async with penguin.Environment.open(config) as env:
        runner: ToolRunner = env  # the static check: mypy fails here if the two drift
        assert runner.take_background_reports() == []


async def test_10_3_the_engine_runs_its_calls_through_any_tool_runner() -> None:
    runner = EchoRunner()
    llm = ScriptedLLM([turn(tool_call("echo", {"say": "hi"}, "c1")), "heard it"])
    engine = Engine(llm=llm, environment=runner, system_prompt="You are a test.", tools=())
    seen, result = await run_task(engine, "echo hi", approve=allow_all)
    assert result.status == "completed"
    assert runner.calls == ["c1"]
    outputs = [m.payload for m in seen if isinstance(m.payload, om.ToolCallOutputPayload)]
    assert [(o.tool_call_id, o.output) for o in outputs] == [("c1", 'echo {"say":"hi"}')]
    # The output and the runner's notice are the next request's input, in that order.
    (second,) = llm.requests[1:]
    assert second.messages[-2].payload == outputs[0]
    assert texts(second.messages[-1:]) == ["[background_task_done]\nthe echo is done"]

"""describe_image (reference 3.12) and its wiring to the project's vision model (reference 6.4).

The vision model is a :class:`~penguin.llm.ScriptedLLM`, the real OpenAI client
against a local OpenAI-compatible endpoint, or a gated fake whose answer waits on
the test (to show that text streams through as it comes, and that an interrupt
stops the request), each wrapped the way the composition layer wraps the
project's ``vision_model``.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import attrs
import pytest
import trio

import penguin
from penguin import config as cfg
from penguin import protocol as om
from penguin.agent import _VisionModel as VisionModel
from penguin.config import ImageSettings, ToolDefinitionConfig
from penguin.environment import ToolServices, VisionService
from penguin.environment.tools.describe_image import (
    DEFAULT_PROMPT,
    NO_VISION_MODEL,
    DescribeImageTool,
)
from penguin.llm import (
    LLMOutcome,
    ModelRef,
    OpenAIChatLLM,
    ScriptedLLM,
    error,
    text,
    thinking,
    tool_call,
    turn,
)
from penguin.llm import testing as t

from .conftest import Run, make_context
from .test_read_image import GIF, JPEG, PNG, data_url, needs_pillow, serve_images

SCRIPTED: Final = "scripted"
HEADER_PNG: Final = "image/png, 70 B — described by scripted:\n"


async def describe(
    workspace: Path,
    args: dict[str, Any],
    vision: VisionService | None,
    *,
    settings: ImageSettings | None = None,
) -> Run:
    """One call of the tool itself: every delta (forwarding fails the test)."""
    entry = ToolDefinitionConfig(name="describe_image", description="t", timeout_ms=90000)
    services = ToolServices(vision=vision, images=settings or ImageSettings())
    tool = DescribeImageTool(entry, services)
    sink: list[str] = []
    result = await tool.execute(args, make_context(workspace, entry, sink))
    return Run(tuple(sink), result)


@asynccontextmanager
async def environment(
    workspace: Path, vision: VisionService | None
) -> AsyncIterator[penguin.Environment]:
    config = penguin.EnvironmentConfig(
        workspace_dir=workspace, services=ToolServices(vision=vision)
    )
    async with penguin.Environment.open(config) as env:
        yield env


@pytest.fixture
def picture(workspace: Path) -> str:
    (workspace / "shot.png").write_bytes(PNG)
    return "shot.png"


# ==========================================================================================
# 3.0.1 and 3.12.1: registration and the checks before any request
# ==========================================================================================


def test_3_0_1_describe_image_is_registered() -> None:
    from penguin.environment.tools.registry import BUILTIN_TOOLS

    assert BUILTIN_TOOLS["describe_image"] is DescribeImageTool


@pytest.mark.parametrize("args", [{}, {"source": ""}, {"source": 7}, {"prompt": "hi"}])
async def test_3_12_1_missing_source(workspace: Path, args: dict[str, Any]) -> None:
    llm = ScriptedLLM(["never"])
    run = await describe(workspace, args, VisionModel(llm))
    assert run.deltas == ('Missing required argument "source" for describe_image.',)
    assert run.stop == "failed"
    assert llm.requests == []


async def test_3_12_1_source_is_checked_before_the_vision_model(workspace: Path) -> None:
    run = await describe(workspace, {}, None)
    assert run.deltas == ('Missing required argument "source" for describe_image.',)


@pytest.mark.parametrize("vision", [None, VisionModel(None)], ids=["no service", "model_id None"])
async def test_3_12_1_no_vision_model(
    workspace: Path, picture: str, vision: VisionService | None
) -> None:
    run = await describe(workspace, {"source": picture}, vision)
    assert run.deltas == (NO_VISION_MODEL,)
    assert NO_VISION_MODEL == (
        "No vision model is configured for this project. The current model does not accept "
        "images; ask the user to pick a vision model in the model settings (vision_model) "
        "to enable image reading."
    )
    assert run.stop == "failed"


async def test_3_12_1_no_vision_model_is_checked_before_loading(workspace: Path) -> None:
    run = await describe(workspace, {"source": "missing.png"}, None)
    assert run.deltas == (NO_VISION_MODEL,)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "missing.png",
            'Failed to read image "missing.png": ENOENT: No such file or directory, '
            "'{ws}/missing.png'",
        ),
        ("empty.png", 'Image "empty.png" is empty.'),
        ("notes.txt", "Unsupported image type: only png, jpeg, gif and webp are supported."),
        ("big.png", "Image too large: 6.0 MB exceeds the 5.0 MB limit."),
    ],
)
async def test_3_12_1_load_errors_are_read_images_and_the_model_is_not_called(
    workspace: Path, source: str, expected: str
) -> None:
    (workspace / "empty.png").write_bytes(b"")
    (workspace / "notes.txt").write_text("hello")
    (workspace / "big.png").write_bytes(PNG + b"\0" * (6 * 1024 * 1024 - len(PNG)))
    llm = ScriptedLLM(["never"])
    run = await describe(workspace, {"source": source}, VisionModel(llm))
    assert run.deltas == (expected.format(ws=workspace),)
    assert run.stop == "failed"
    assert llm.requests == []


async def test_3_12_1_download_errors_are_read_images_too(workspace: Path) -> None:
    llm = ScriptedLLM(["never"])
    async with serve_images({}) as server:
        url = server.url("/gone.png")
        run = await describe(workspace, {"source": url}, VisionModel(llm))
    assert run.deltas == (f'Failed to download image "{url}": HTTP 404',)
    assert llm.requests == []


# ==========================================================================================
# 3.12.2 the request
# ==========================================================================================


async def test_3_12_2_two_user_messages_prompt_then_image(workspace: Path, picture: str) -> None:
    llm = ScriptedLLM([turn(text("Red and blue."))])
    await describe(workspace, {"source": picture, "prompt": "Which colours?"}, VisionModel(llm))
    (request,) = llm.requests
    assert [message.payload for message in request.messages] == [
        om.user_text("Which colours?").payload,
        om.image_url(data_url("image/png", PNG)).payload,
    ]
    assert all(message.origin is None for message in request.messages)
    assert (request.system_prompt, request.tools, request.thinking_level) == ("", (), None)


@pytest.mark.parametrize("prompt", [None, "", "   \n", 42, ["x"]])
async def test_3_12_2_blank_prompt_asks_the_default_question(
    workspace: Path, picture: str, prompt: object
) -> None:
    llm = ScriptedLLM([turn(text("ok"))])
    args: dict[str, Any] = {"source": picture}
    if prompt is not None:
        args["prompt"] = prompt
    await describe(workspace, args, VisionModel(llm))
    first = llm.requests[0].messages[0].payload
    assert isinstance(first, om.TextPayload)
    assert (first.role, first.text) == ("user", DEFAULT_PROMPT)
    assert DEFAULT_PROMPT == (
        "Describe this image in detail, including any visible text, numbers, UI elements "
        "and layout."
    )


async def test_3_12_2_the_prompt_is_sent_verbatim(workspace: Path, picture: str) -> None:
    llm = ScriptedLLM([turn(text("ok"))])
    await describe(
        workspace, {"source": picture, "prompt": "  Read the label.\n"}, VisionModel(llm)
    )
    first = llm.requests[0].messages[0].payload
    assert isinstance(first, om.TextPayload)
    assert first.text == "  Read the label.\n"


async def test_3_12_2_request_on_the_wire(workspace: Path) -> None:
    (workspace / "a.jpg").write_bytes(JPEG)

    def handler(request: t.ReceivedRequest) -> t.Reply:
        return t.sse_reply([t.content_chunk("A grey"), t.content_chunk(" dot."), t.finish_chunk()])

    async with (
        t.serve_openai_compatible(handler) as server,
        OpenAIChatLLM(base_url=server.base_url, model_id="seer") as llm,
    ):
        run = await describe(
            workspace, {"source": "a.jpg", "prompt": "What is it?"}, VisionModel(llm)
        )
    body = server.requests[0].json()
    assert body["model"] == "seer"
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is it?"},
                {"type": "image_url", "image_url": {"url": data_url("image/jpeg", JPEG)}},
            ],
        }
    ]
    assert "tools" not in body
    assert run.deltas == ("image/jpeg, 141 B — described by seer:\n", "A grey", " dot.")
    assert run.stop == "completed"


# ==========================================================================================
# 3.12.3 the output
# ==========================================================================================


async def test_3_12_3_header_then_each_text_delta(workspace: Path, picture: str) -> None:
    llm = ScriptedLLM([turn(text("Two ", "pixels", ": red, blue."))])
    run = await describe(workspace, {"source": picture}, VisionModel(llm))
    assert run.deltas == (HEADER_PNG, "Two ", "pixels", ": red, blue.")
    assert run.stop == "completed"
    assert run.result is not None
    assert (run.result.images, run.result.note) == ((), None)


async def test_3_12_3_other_model_messages_are_dropped(workspace: Path, picture: str) -> None:
    llm = ScriptedLLM(
        [turn(thinking("Let me look."), text("A GIF."), tool_call("read_file", {"x": 1}))]
    )
    (Path(workspace) / "a.gif").write_bytes(GIF)
    run = await describe(workspace, {"source": "a.gif"}, VisionModel(llm))
    assert run.deltas == ("image/gif, 43 B — described by scripted:\n", "A GIF.")
    assert run.stop == "completed"


async def test_3_12_3_nothing_leaks_into_the_parent_stream(workspace: Path, picture: str) -> None:
    llm = ScriptedLLM([turn(thinking("hm"), text("Red", " and blue."))])
    async with (
        environment(workspace, VisionModel(llm)) as env,
        env.execute_tool(om.tool_call("describe_image", {"source": picture}, "c1")) as stream,
    ):
        messages = [message async for message in stream]
    kinds = [
        (getattr(m.payload, "type", None), getattr(m.payload, "event_type", None)) for m in messages
    ]
    assert kinds == [
        ("partial_tool_call_output", "start"),
        ("partial_tool_call_output", "delta"),
        ("partial_tool_call_output", "delta"),
        ("partial_tool_call_output", "delta"),
        ("partial_tool_call_output", "stop"),
        ("tool_call_output", None),
    ]
    assert all(message.origin is None for message in messages)
    complete = messages[-1].payload
    assert isinstance(complete, om.ToolCallOutputPayload)
    assert complete.output == HEADER_PNG + "Red and blue."
    assert complete.images is None  # 3.12.3: never returns images
    assert complete.stop_reason == "completed"


async def test_3_12_3_complete_text_without_deltas_is_forwarded(
    workspace: Path, picture: str
) -> None:
    run = await describe(workspace, {"source": picture}, CompleteOnly(["First.", "Second."]))
    assert run.deltas == ("image/png, 70 B — described by complete-only:\n", "First.", "Second.")


@pytest.mark.parametrize(
    ("steps", "deltas"),
    [
        (
            (text("Half a"), error("timeout", "stalled")),
            ("Half a", "\nVision model (scripted) request timeout: stalled"),
        ),
        ((error("auth", "bad key"),), ("Vision model (scripted) request auth: bad key",)),
        ((error("failed", ""),), ("Vision model (scripted) request failed",)),
        (
            (thinking("..."), error("malformed", "cut")),
            ("Vision model (scripted) request malformed: cut",),
        ),
    ],
)
async def test_3_12_3_non_completed_outcome(
    workspace: Path, picture: str, steps: tuple[Any, ...], deltas: tuple[str, ...]
) -> None:
    llm = ScriptedLLM([turn(*steps)])
    run = await describe(workspace, {"source": picture}, VisionModel(llm))
    assert run.deltas == (HEADER_PNG, *deltas)
    assert run.stop == "failed"


async def test_3_12_3_non_completed_outcome_from_a_server(workspace: Path, picture: str) -> None:
    async with (
        t.serve_openai_compatible(lambda request: t.ErrorReply(400, "no images here")) as server,
        OpenAIChatLLM(base_url=server.base_url, model_id="seer") as llm,
    ):
        run = await describe(workspace, {"source": picture}, VisionModel(llm))
    assert run.deltas[0] == "image/png, 70 B — described by seer:\n"
    assert run.deltas[1].startswith("Vision model (seer) request failed: 400")
    assert "no images here" in run.deltas[1]
    assert run.stop == "failed"


@pytest.mark.parametrize("steps", [(), (thinking("I see nothing."),), (text(""),)])
async def test_3_12_3_no_text(workspace: Path, picture: str, steps: tuple[Any, ...]) -> None:
    llm = ScriptedLLM([turn(*steps)])
    run = await describe(workspace, {"source": picture}, VisionModel(llm))
    assert run.deltas == (HEADER_PNG, "[vision model returned no text]")
    assert run.stop == "completed"


# ==========================================================================================
# streaming and interrupts, with a gated fake vision model
# ==========================================================================================


@attrs.define(eq=False)
class GatedResponse:
    """Streams ``first``, waits for ``gate``, then streams ``rest`` and completes."""

    first: str
    rest: str
    gate: trio.Event
    ended: LLMOutcome | None = None

    @property
    def outcome(self) -> LLMOutcome:
        assert self.ended is not None, "read before the end of the stream"
        return self.ended

    async def __aiter__(self) -> AsyncIterator[om.OmniMessage[om.Payload]]:
        yield om.partial_text("start")
        yield om.partial_text("delta", self.first)
        await self.gate.wait()
        yield om.partial_text("delta", self.rest)
        yield om.partial_text("stop")
        yield om.assistant_text(self.first + self.rest)
        self.ended = LLMOutcome("completed")


@attrs.define(eq=False)
class GatedVision:
    """A vision service whose answer waits on the test; it records how requests ended."""

    model_id: str | None = "gated"
    gate: trio.Event = attrs.Factory(trio.Event)
    closed: trio.Event = attrs.Factory(trio.Event)

    @asynccontextmanager
    async def stream(
        self, messages: Sequence[om.OmniMessage[om.CompleteModelPayload]]
    ) -> AsyncIterator[GatedResponse]:
        try:
            yield GatedResponse("It is ", "red.", self.gate)
        finally:
            self.closed.set()


@attrs.define(eq=False)
class CompleteOnly:
    """A vision service that answers with complete text messages only (no deltas)."""

    texts: list[str]
    model_id: str | None = "complete-only"

    @asynccontextmanager
    async def stream(
        self, messages: Sequence[om.OmniMessage[om.CompleteModelPayload]]
    ) -> AsyncIterator[Any]:
        texts = self.texts

        class Response:
            outcome = LLMOutcome("completed")

            async def __aiter__(self) -> AsyncIterator[om.OmniMessage[om.Payload]]:
                for item in texts:
                    yield om.assistant_text(item)

        yield Response()


def test_the_fakes_are_vision_services() -> None:
    assert isinstance(GatedVision(), VisionService)
    assert isinstance(CompleteOnly([]), VisionService)
    assert isinstance(VisionModel(None), VisionService)


def delta_texts(messages: list[om.OmniMessage[om.Payload]]) -> list[str]:
    return [
        m.payload.output
        for m in messages
        if isinstance(m.payload, om.PartialToolCallOutputPayload)
        and m.payload.event_type == "delta"
    ]


async def test_3_12_3_text_is_forwarded_as_it_streams(workspace: Path, picture: str) -> None:
    vision = GatedVision()
    seen: list[om.OmniMessage[om.Payload]] = []
    call = om.tool_call("describe_image", {"source": picture}, "c1")
    with trio.fail_after(10):  # had the tool waited for the whole answer, this would hang
        async with environment(workspace, vision) as env, env.execute_tool(call) as stream:
            async for message in stream:
                seen.append(message)
                if delta_texts([message]) == ["It is "]:
                    vision.gate.set()
    assert delta_texts(seen) == ["image/png, 70 B — described by gated:\n", "It is ", "red."]
    complete = seen[-1].payload
    assert isinstance(complete, om.ToolCallOutputPayload)
    assert complete.stop_reason == "completed"
    assert vision.closed.is_set()


async def test_3_12_3_an_interrupt_stops_the_vision_request(workspace: Path, picture: str) -> None:
    vision = GatedVision()
    interrupt = trio.Event()
    seen: list[om.OmniMessage[om.Payload]] = []
    call = om.tool_call("describe_image", {"source": picture}, "c1")
    with trio.fail_after(10):
        async with environment(workspace, vision) as env:
            async with env.execute_tool(call, interrupt=interrupt) as stream:
                async for message in stream:
                    seen.append(message)
                    if delta_texts([message]) == ["It is "]:
                        interrupt.set()
            await vision.closed.wait()
    complete = seen[-1].payload
    assert isinstance(complete, om.ToolCallOutputPayload)
    assert complete.stop_reason == "aborted"
    assert complete.output == (
        "image/png, 70 B — described by gated:\nIt is \n[interrupted: tool aborted by user]"
    )


async def test_3_12_3_an_interrupt_stops_a_stalled_server_request(
    workspace: Path, picture: str
) -> None:
    started = trio.Event()

    def handler(request: t.ReceivedRequest) -> t.Reply:
        started.set()
        return t.sse_reply([t.content_chunk("Looking")], done=False, end="stall")

    interrupt = trio.Event()
    async with (
        t.serve_openai_compatible(handler) as server,
        OpenAIChatLLM(base_url=server.base_url, model_id="seer") as llm,
        environment(workspace, VisionModel(llm)) as env,
    ):
        call = om.tool_call("describe_image", {"source": picture}, "c1")
        with trio.fail_after(10):  # the tool's own timeout is 90 s
            async with trio.open_nursery() as nursery:

                async def interrupt_when_asked() -> None:
                    await started.wait()
                    interrupt.set()

                nursery.start_soon(interrupt_when_asked)
                output = await env.call_tool(call, interrupt=interrupt)
    assert output.payload.stop_reason == "aborted"
    assert output.payload.output.endswith("\n[interrupted: tool aborted by user]")


# ==========================================================================================
# images settings reach describe_image too
# ==========================================================================================


async def test_describe_image_without_pillow_notes_it(
    workspace: Path, picture: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("penguin.environment.tools._images.pillow_available", lambda: False)
    llm = ScriptedLLM([turn(text("ok"))])
    run = await describe(
        workspace,
        {"source": picture},
        VisionModel(llm),
        settings=ImageSettings(downscale=True),
    )
    assert run.deltas == (HEADER_PNG, "ok")
    assert run.result is not None
    assert run.result.note is not None
    assert "Pillow is not installed" in run.result.note


@needs_pillow
async def test_describe_image_sends_the_downscaled_image(workspace: Path) -> None:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (100, 50), "blue").save(buffer, "PNG")
    (workspace / "wide.png").write_bytes(buffer.getvalue())
    llm = ScriptedLLM([turn(text("Blue."))])
    run = await describe(
        workspace,
        {"source": "wide.png"},
        VisionModel(llm),
        settings=ImageSettings(downscale=True, max_edge=10),
    )
    assert "(downscaled from 100×50 to 10×5; original image/png, " in run.deltas[0]
    assert run.deltas[0].endswith(" — described by scripted:\n")
    image = llm.requests[0].messages[1].payload
    assert isinstance(image, om.ImageUrlPayload)
    sent = Image.open(io.BytesIO(base64.b64decode(image.image_url.split(",", 1)[1])))
    assert sent.size == (10, 5)


# ==========================================================================================
# 6.4 the composition layer: tool selection and the project's vision_model
# ==========================================================================================


def save_project(agent: penguin.Agent, project: cfg.ProjectConfig) -> None:
    cfg.save_project_config(agent.paths.project_config, project)


def with_model(agent: penguin.Agent, base_url: str, *, vision: bool = True) -> cfg.ProjectConfig:
    entry = cfg.ModelEntry(provider="local", model_id="seer", base_url=base_url, vision=vision)
    return cfg.add_model(cfg.ProjectConfig(path=agent.paths.project_config), entry)


async def call_in_session(
    agent: penguin.Agent, workspace: Path, name: str, args: dict[str, Any], *, vision: bool
) -> tuple[list[str], om.ToolCallOutputPayload]:
    llm = ScriptedLLM([], model=ModelRef("local", "talker"))
    async with agent.session(workspace, llm=llm, vision=vision) as session:
        names = [tool.name for tool in await session.environment.list_tools()]
        output = await session.environment.call_tool(om.tool_call(name, args, "c1"))
    return names, output.payload


async def test_6_4_a_text_only_session_describes_with_the_vision_model(
    tmp_path: Path, workspace: Path, picture: str
) -> None:
    def handler(request: t.ReceivedRequest) -> t.Reply:
        return t.sse_reply([t.content_chunk("Two pixels."), t.finish_chunk()])

    agent = penguin.Agent.open(tmp_path / "root")
    async with t.serve_openai_compatible(handler) as server:
        project = cfg.set_vision_model(with_model(agent, server.base_url), "local", "seer")
        save_project(agent, project)
        names, output = await call_in_session(
            agent, workspace, "describe_image", {"source": picture}, vision=False
        )
    assert "describe_image" in names
    assert "read_image" not in names
    assert output.output == "image/png, 70 B — described by seer:\nTwo pixels."
    assert output.stop_reason == "completed"
    assert server.requests[0].json()["model"] == "seer"


@pytest.mark.parametrize("reference", ["unset", "dangling", "not vision"])
async def test_6_4_no_usable_vision_model_means_model_id_none(
    tmp_path: Path, workspace: Path, picture: str, reference: str
) -> None:
    agent = penguin.Agent.open(tmp_path / "root")
    project = with_model(agent, "http://127.0.0.1:9/v1", vision=reference != "not vision")
    if reference == "dangling":
        project = attrs.evolve(project, vision_model=cfg.ModelKey("gone", "model"))
    elif reference == "not vision":
        project = attrs.evolve(project, vision_model=cfg.ModelKey("local", "seer"))
    save_project(agent, project)
    names, output = await call_in_session(
        agent, workspace, "describe_image", {"source": picture}, vision=False
    )
    assert "describe_image" in names
    assert output.output == NO_VISION_MODEL
    assert output.stop_reason == "failed"


async def test_6_4_a_vision_session_reads_images_itself(
    tmp_path: Path, workspace: Path, picture: str
) -> None:
    agent = penguin.Agent.open(tmp_path / "root")
    names, output = await call_in_session(
        agent, workspace, "read_image", {"source": picture}, vision=True
    )
    assert "read_image" in names
    assert "describe_image" not in names
    assert output.output == "image/png, 70 B"
    assert output.images == (data_url("image/png", PNG),)


@needs_pillow
async def test_6_4_the_agent_images_settings_reach_the_tools(
    tmp_path: Path, workspace: Path
) -> None:
    import io

    from PIL import Image

    paths = cfg.AgentPaths(tmp_path / "root", cfg.DEFAULT_PROJECT_ID, cfg.DEFAULT_AGENT_ID)
    paths.system_config.parent.mkdir(parents=True)
    paths.system_config.write_text("images: {downscale: true, maxEdge: 8}\n", encoding="utf-8")
    agent = penguin.Agent.open(tmp_path / "root")
    assert agent.config.images == ImageSettings(downscale=True, max_edge=8)
    buffer = io.BytesIO()
    Image.new("RGB", (16, 8), "green").save(buffer, "PNG")
    (workspace / "g.png").write_bytes(buffer.getvalue())
    _, output = await call_in_session(
        agent, workspace, "read_image", {"source": "g.png"}, vision=True
    )
    assert "(downscaled from 16×8 to 8×4; original image/png, " in output.output


async def test_the_vision_model_wrapper_refuses_without_a_model() -> None:
    with pytest.raises(RuntimeError, match="no vision model"):
        VisionModel(None).stream([om.user_text("x")])
    assert VisionModel(None).model_id is None
    assert VisionModel(ScriptedLLM([], model=ModelRef("p", "eyes"))).model_id == "eyes"

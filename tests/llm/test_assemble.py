"""The assembler: the fragment discipline for any sequence of deltas."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from penguin import protocol as om
from penguin.llm._assemble import StreamAssembler

from .discipline import check_discipline, kind, tool_calls


def ids() -> StreamAssembler:
    counter = itertools.count(1)
    return StreamAssembler(lambda given: given or f"gen_{next(counter)}")


def kinds(messages: list[om.OmniMessage[om.Payload]]) -> list[str]:
    return [kind(message) for message in messages]


def test_text_then_close() -> None:
    assembler = ids()
    assembler.text("Hel")
    assembler.text("")
    assembler.text("lo")
    assembler.close()
    out = assembler.take()
    assert kinds(out) == [
        "partial_text:start",
        "partial_text:delta",  # the deltas of one batch are joined
        "partial_text:stop",
        "text",
    ]
    assert out[1].payload.text == "Hello"  # type: ignore[union-attr]
    assert out[-1] == om.OmniMessage(
        out[-1].timestamp,
        "model_msg",
        om.TextPayload(role="assistant", text="Hello", stop_reason="completed"),
    )


def test_switching_kinds_closes_the_open_fragment() -> None:
    assembler = ids()
    assembler.thinking("hmm", {"reasoning_field": "reasoning"})
    assembler.text("A")
    assembler.tool_call(0, tool_call_id="c", name="f", arguments="{}")
    assembler.text("B")
    assembler.close()
    completes = check_discipline(assembler.take())
    assert [kind(message) for message in completes] == [
        "thinking",
        "text",
        "text",
        "tool_call",
    ]
    assert completes[0].payload == om.ThinkingPayload(
        thinking="hmm", stop_reason="completed", fidelity={"reasoning_field": "reasoning"}
    )


def test_tool_calls_interleave_and_close_in_start_order() -> None:
    assembler = ids()
    assembler.tool_call(1, tool_call_id="b", name="second", arguments='{"x"')
    assembler.tool_call(0, name="first", arguments="{")
    assembler.tool_call(1, arguments=":1}")
    assembler.tool_call(0, tool_call_id="ignored", arguments="}")
    assembler.close()
    completes = check_discipline(assembler.take())
    assert [(p.tool_call_id, p.name, p.arguments) for p in tool_calls(completes)] == [
        ("b", "second", '{"x":1}'),
        ("gen_1", "first", "{}"),
    ]


def test_a_name_that_comes_late_reaches_the_complete_message() -> None:
    assembler = ids()
    assembler.tool_call(0, tool_call_id="c", arguments="{")
    assembler.tool_call(0, name="late", arguments="}")
    assembler.close()
    completes = check_discipline(assembler.take())
    assert completes[0].payload == om.ToolCallPayload(
        name="late", arguments="{}", tool_call_id="c", stop_reason="completed"
    )


def test_close_with_an_error_marks_every_open_fragment() -> None:
    assembler = ids()
    assembler.text("cut")
    assembler.tool_call(0, tool_call_id="c", name="f", arguments='{"a"')
    assembler.text("more")
    assembler.close("timeout")
    completes = check_discipline(assembler.take())
    assert [m.payload.stop_reason for m in completes] == ["completed", "timeout", "timeout"]


def test_a_batch_shares_one_timestamp() -> None:
    assembler = ids()
    assembler.text("a")
    assembler.text("b")
    assembler.close()
    first = assembler.take()
    assert len({message.timestamp for message in first}) == 1
    assert assembler.take() == []


_step = st.one_of(
    st.tuples(st.just("text"), st.text(max_size=5)),
    st.tuples(st.just("thinking"), st.text(max_size=5)),
    st.tuples(st.just("call"), st.integers(0, 3), st.text(max_size=5)),
    st.tuples(st.just("take")),
)


@given(st.lists(_step, max_size=30), st.sampled_from(["completed", "timeout", "malformed"]))
def test_any_delta_sequence_keeps_the_discipline(
    steps: list[tuple[object, ...]], stop_reason: om.StopReason
) -> None:
    assembler = ids()
    out: list[om.OmniMessage[om.Payload]] = []
    texts: list[str] = []
    for step in steps:
        match step:
            case ("text", str(delta)):
                assembler.text(delta)
                texts.append(delta)
            case ("thinking", str(delta)):
                assembler.thinking(delta)
            case ("call", int(key), str(arguments)):
                assembler.tool_call(key, name=f"tool{key}", arguments=arguments)
            case _:
                out.extend(assembler.take())
    assembler.close(stop_reason)
    out.extend(assembler.take())
    completes = check_discipline(out)
    streamed_text = "".join(
        m.payload.text for m in completes if isinstance(m.payload, om.TextPayload)
    )
    assert streamed_text == "".join(texts)


def test_deltas_of_different_batches_stay_apart() -> None:
    assembler = ids()
    assembler.text("Hel")
    first = assembler.take()
    assembler.text("lo")
    assembler.close()
    second = assembler.take()
    assert [m.payload.text for m in first if om.is_partial(m)] == ["", "Hel"]  # type: ignore[union-attr]
    assert [getattr(m.payload, "text", None) for m in second][:1] == ["lo"]

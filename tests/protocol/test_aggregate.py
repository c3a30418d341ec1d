"""The partial aggregator rebuilds complete messages from fragments."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from penguin import protocol as om


def test_text_fragments_join_into_one_message() -> None:
    agg = om.PartialAggregator()
    assert agg.push(om.partial_text("start")) == []
    assert agg.push(om.partial_text("delta", "hel")) == []
    assert agg.push(om.partial_text("delta", "lo")) == []
    [done] = agg.push(om.partial_text("stop"))
    assert isinstance(done.payload, om.TextPayload)
    assert done.payload.text == "hello"
    assert done.payload.role == "assistant"


def test_concurrent_tool_outputs_stay_apart_and_keep_images() -> None:
    agg = om.PartialAggregator()
    seq = [
        om.partial_tool_call_output("start", "", "a"),
        om.partial_tool_call_output("start", "", "b"),
        om.partial_tool_call_output("delta", "A1", "a"),
        om.partial_tool_call_output("delta", "B1", "b"),
        om.partial_tool_call_output("delta", "", "a", images=["data:x"]),
        om.partial_tool_call_output("stop", "", "b", "failed"),
        om.partial_tool_call_output("stop", "", "a"),
    ]
    out = [m for msg in seq for m in agg.push(msg)]
    assert [
        (m.payload.tool_call_id, m.payload.output, m.payload.stop_reason)  # type: ignore[union-attr]
        for m in out
    ] == [("b", "B1", "failed"), ("a", "A1", "completed")]
    assert out[1].payload.images == ("data:x",)  # type: ignore[union-attr]


def test_tool_call_fragments_keep_name_and_id() -> None:
    agg = om.PartialAggregator()
    msgs = [
        om.partial_tool_call("start", "read_file", "c1"),
        om.partial_tool_call("delta", "", "c1", '{"file_path":'),
        om.partial_tool_call("delta", "", "c1", '"x"}'),
        om.partial_tool_call("stop", "", "c1"),
    ]
    [done] = [m for msg in msgs for m in agg.push(msg)]
    assert om.is_tool_call(done)
    assert done.payload.name == "read_file"
    assert done.payload.arguments == '{"file_path":"x"}'


def test_non_partials_pass_through_and_flush_closes_open_fragments() -> None:
    event = om.request_begin()
    out = om.aggregate_all(
        [
            om.partial_thinking("start"),
            om.partial_thinking("delta", "hm"),
            event,
        ]
    )
    assert out[0] is event
    assert isinstance(out[1].payload, om.ThinkingPayload)
    assert out[1].payload.thinking == "hm"


def test_origin_tagged_fragments_are_kept_apart_and_keep_their_origin() -> None:
    child = [
        om.with_origin(m, "kid") for m in (om.partial_text("start"), om.partial_text("delta", "k"))
    ]
    own = [om.partial_text("start"), om.partial_text("delta", "p"), om.partial_text("stop")]
    out = om.aggregate_all([child[0], own[0], child[1], own[1], own[2]])
    assert [(m.origin, m.payload.text) for m in out] == [(None, "p"), (("kid",), "k")]  # type: ignore[union-attr]


@given(st.lists(st.text(max_size=5), max_size=8))
def test_aggregated_text_is_the_concatenation(parts: list[str]) -> None:
    stream = [
        om.partial_text("start"),
        *(om.partial_text("delta", p) for p in parts),
        om.partial_text("stop"),
    ]
    [done] = om.aggregate_all(stream)
    assert done.payload.text == "".join(parts)  # type: ignore[union-attr]

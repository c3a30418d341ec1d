"""The Ledger's rules, fed by hand (sans-IO), and the engine's fragment closing."""

from __future__ import annotations

import attrs

from penguin import protocol as om
from penguin.engine import INTERRUPTED_OUTPUT, Ledger
from penguin.engine._markers import extract_summary, transcript_lines, turn_block
from penguin.engine._stream import OpenFragments

from .support import kind, texts

Message = om.OmniMessage[om.Payload]


def at(message: Message, timestamp: str) -> Message:
    return attrs.evolve(message, timestamp=timestamp)


def fed(*messages: Message) -> Ledger:
    ledger = Ledger()
    for message in messages:
        ledger.observe(message)
    return ledger


def test_a_committed_turn_becomes_history_and_its_calls_are_awaited() -> None:
    ledger = fed(
        om.user_text("go"),
        om.request_begin(),
        om.tool_call("probe", "{}", "c1"),
        om.tool_call("probe", "{}", "c2", stop_reason="aborted"),
        om.token_usage(om.TokenCounts(total=7), om.TokenCounts(total=7)),
        om.request_end("completed"),
    )
    assert ledger.turns == 1
    assert ledger.awaiting == ["c1"]  # a cut call is never awaited
    assert [kind(m) for m in ledger.history] == ["text", "tool_call", "tool_call"]
    assert ledger.last_request_total == 7
    assert ledger.has_input()
    assert not ledger.turn_open


def test_outputs_join_the_next_input_in_call_order_whenever_they_arrived() -> None:
    ledger = fed(
        om.user_text("go"),
        om.request_begin(),
        om.tool_call("probe", "{}", "c1"),
        om.tool_call("probe", "{}", "c2"),
        om.tool_call_output("two", "c2"),
        om.request_end("completed"),
        om.tool_call_output("one", "c1"),
        om.user_text("and then"),
        om.request_begin(),
    )
    tail = ledger.request_messages()[-3:]
    assert [getattr(m.payload, "output", None) for m in tail] == ["one", "two", None]
    assert texts(tail) == ["and then"]


def test_after_a_crash_a_call_without_output_gets_a_placeholder_stamped_by_the_next_request() -> (
    None
):
    begin = at(om.request_begin(), "2026-01-01T00:00:09.000Z")
    ledger = fed(
        om.user_text("go"),
        om.request_begin(),
        om.tool_call("probe", "{}", "c1"),
        om.request_end("completed"),
        begin,
    )
    placeholder = ledger.request_messages()[-1]
    assert placeholder.timestamp == begin.timestamp
    assert placeholder.payload == om.ToolCallOutputPayload(
        output=INTERRUPTED_OUTPUT, tool_call_id="c1", stop_reason="aborted"
    )


def test_a_retried_block_is_stamped_by_the_failed_request_end() -> None:
    failed = at(om.request_end("timeout", attempt=1, retry_in_ms=2000), "2026-01-01T00:00:05.000Z")
    ledger = fed(
        om.user_text("go"),
        om.request_begin(),
        om.assistant_text("half", "timeout"),
        failed,
        om.request_begin(),
    )
    assert ledger.attempt == 2
    block = ledger.request_messages()[-1]
    assert block.timestamp == failed.timestamp
    assert texts([block]) == ["[turn_retried]\n  [text]half[/text]\n[/turn_retried]"]


def test_an_abort_inside_a_compaction_closes_it() -> None:
    ledger = fed(
        om.user_text("go"),
        om.request_begin(),
        om.assistant_text("done"),
        om.request_end("completed"),
        om.compaction_begin("manual", "summarize", 0, 1),
        om.request_begin(),
        om.abort("cancelled"),
        om.user_text("next"),
    )
    assert texts(ledger.pending) == ["next"]
    assert ledger.turns == 1
    assert texts(ledger.history) == ["go", "done"]


def test_a_summary_request_does_not_measure_the_context() -> None:
    ledger = fed(
        om.token_usage(om.TokenCounts(total=500), om.TokenCounts(total=500)),
        om.compaction_begin("context", "summarize", 500, 3),
        om.token_usage(om.TokenCounts(total=900), om.TokenCounts(total=400)),
        om.compaction_end("context", "summarize", "failed", attempt=1),
    )
    assert ledger.last_request_total == 500
    assert ledger.session_tokens == om.TokenCounts(total=900)


def test_open_fragments_close_with_a_stop_and_an_aborted_message() -> None:
    fragments = OpenFragments()
    fragments.push(om.partial_text("start"))
    fragments.push(om.partial_text("delta", "Hel"))
    closing = fragments.close()
    assert [kind(m) for m in closing] == ["partial_text:stop", "text"]
    assert closing[1].payload == om.TextPayload(role="assistant", text="Hel", stop_reason="aborted")
    assert fragments.close() == []


def test_a_fragment_cut_between_its_stop_and_its_complete_message_is_completed_aborted() -> None:
    fragments = OpenFragments()
    fragments.push(om.partial_tool_call("start", "probe", "c1"))
    fragments.push(om.partial_tool_call("delta", "probe", "c1", "{}"))
    fragments.push(om.partial_tool_call("stop", "probe", "c1"))
    closing = fragments.close()
    assert [kind(m) for m in closing] == ["tool_call"]  # its stop was already passed on
    assert closing[0].payload == om.ToolCallPayload(
        name="probe", arguments="{}", tool_call_id="c1", stop_reason="aborted"
    )


def test_a_complete_message_settles_its_fragment() -> None:
    fragments = OpenFragments()
    for message in (
        om.partial_thinking("start"),
        om.partial_thinking("delta", "hm"),
        om.partial_thinking("stop"),
        om.thinking("hm"),
    ):
        fragments.push(message)
    assert fragments.close() == []


def test_summary_extraction() -> None:
    assert extract_summary("Sure.\n[summary]\n the gist \n[/summary] bye") == "the gist"
    assert extract_summary("<summary>old style</summary>") == "old style"
    assert extract_summary("  no tags at all  ") == "no tags at all"
    assert extract_summary("[summary][/summary]") == ""


def test_transcripts_list_messages_then_results() -> None:
    produced: list[Message] = [
        om.thinking("plan"),
        om.assistant_text("calling"),
        om.tool_call("probe", '{"a":1}', "c1"),
        om.tool_call("probe", "{}", "c2"),
    ]
    outputs = {"c1": om.tool_call_output("one", "c1", "failed")}
    assert turn_block("turn_aborted", transcript_lines(produced, outputs)) == (
        "[turn_aborted]\n"
        "  [thinking]plan[/thinking]\n"
        "  [text]calling[/text]\n"
        '  [tool_call name="probe" id="c1"]{"a":1}[/tool_call]\n'
        '  [tool_call name="probe" id="c2"]{}[/tool_call]\n'
        '  [tool_call_output id="c1" status="failed"]one[/tool_call_output]\n'
        "[/turn_aborted]"
    )

"""The sans-IO close-out: classification priority, truncation, notes, the delta invariant."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from penguin.environment._closeout import CallOutput, Outcome, classify

OUTCOMES = st.builds(
    Outcome,
    interrupted=st.booleans(),
    timed_out=st.booleans(),
    error=st.none() | st.text(max_size=10),
    self_report=st.none() | st.sampled_from(["completed", "failed", "aborted"]),
)


def test_1_8e_priority_interrupt_beats_timeout_beats_raise_beats_self_report() -> None:
    every = Outcome(interrupted=True, timed_out=True, error="boom", self_report="failed")
    assert classify(every, 1000) == ("aborted", "[interrupted: tool aborted by user]")
    no_interrupt = Outcome(timed_out=True, error="boom", self_report="failed")
    assert classify(no_interrupt, 1000) == ("failed", "[tool timeout: exceeded 1000ms]")
    raised = Outcome(error="boom", self_report="completed")
    assert classify(raised, 1000) == ("failed", "[tool error] boom")
    assert classify(Outcome(self_report="failed"), 1000) == ("failed", None)
    assert classify(Outcome(), 1000) == ("completed", None)


def test_1_8e_self_reported_abort_because_of_timeout_is_a_timeout() -> None:
    outcome = Outcome(timed_out=True, self_report="aborted")
    assert classify(outcome, 5) == ("failed", "[tool timeout: exceeded 5ms]")


def test_1_8c_self_reported_abort_alone_is_an_interrupt() -> None:
    assert classify(Outcome(self_report="aborted"), 5) == (
        "aborted",
        "[interrupted: tool aborted by user]",
    )


def test_1_7b_head_keep_truncation_cuts_the_straddling_delta_and_drops_later_ones() -> None:
    out = CallOutput(5, archive=False)
    assert out.accept("abc") == "abc"
    assert out.accept("defg") == "de"
    assert out.accept("hij") == ""
    for part in ("abc", "de"):
        out.sent(part)
    closing = out.close(Outcome(), timeout_ms=0)
    assert closing.output == "abcde\n[output truncated: exceeded 5 chars]"
    assert closing.deltas == ("\n[output truncated: exceeded 5 chars]",)


def test_1_8f_never_empty() -> None:
    closing = CallOutput(10, archive=False).close(Outcome(), timeout_ms=0)
    assert closing.output == "[no output]"
    assert closing.deltas == ("[no output]",)


def test_1_8g_no_trimming_blank_line_before_note() -> None:
    out = CallOutput(100, archive=False)
    out.sent(out.accept("hi\n"))
    closing = out.close(Outcome(self_report="failed"), timeout_ms=0, note="[exit code: 3]")
    assert closing.output == "hi\n\n[exit code: 3]"
    assert closing.stop_reason == "failed"


def test_1_8d_note_order() -> None:
    out = CallOutput(2, archive=False)
    out.sent(out.accept("abcdef"))
    closing = out.close(
        Outcome(interrupted=True), timeout_ms=0, archive_note="[output archived: /x]", note="[mine]"
    )
    assert closing.output.split("\n") == [
        "ab",
        "[output truncated: exceeded 2 chars]",
        "[output archived: /x]",
        "[mine]",
        "[interrupted: tool aborted by user]",
    ]


def test_1_9a_compensation_delta_when_nothing_was_sent() -> None:
    out = CallOutput(4, archive=False)
    out.accept("abcdef")  # never reached the consumer
    closing = out.close(Outcome(), timeout_ms=0)
    assert closing.deltas == ("abcd", "\n[output truncated: exceeded 4 chars]")


def test_1_7d_compat_output_replaces_the_basis_and_remainder_is_sent() -> None:
    out = CallOutput(100, archive=False)
    out.sent(out.accept("par"))
    assert out.replace("partial and more")
    closing = out.close(Outcome(), timeout_ms=0)
    assert closing.deltas == ("tial and more",)
    assert closing.output == "partial and more"


def test_compat_output_that_contradicts_what_was_sent_is_refused() -> None:
    out = CallOutput(100, archive=False)
    out.sent(out.accept("abc"))
    assert not out.replace("xyz")
    assert out.close(Outcome(), timeout_ms=0).output == "abc"


def test_2_2_capture_is_lazy_and_seeded_with_the_forwarded_prefix() -> None:
    out = CallOutput(4, archive=True)
    out.accept("ab")
    before = out.capture
    assert before is None
    out.accept("cdef")
    capture = out.capture
    assert capture is not None
    out.accept("gh")
    assert b"".join(capture.render()) == b"abcdefgh"


def test_2_2_no_capture_without_archive_or_without_truncation() -> None:
    quiet = CallOutput(4, archive=True)
    quiet.accept("abcd")
    assert quiet.capture is None
    off = CallOutput(4, archive=False)
    off.accept("abcdefgh")
    assert off.capture is None


def test_1_5_limit_zero_disables_truncation() -> None:
    out = CallOutput(0, archive=True)
    assert out.accept("x" * 100_000) == "x" * 100_000
    assert out.capture is None


def test_1_9c_images_only_on_completed() -> None:
    ok = CallOutput(10, archive=False).close(Outcome(), timeout_ms=0, images=("data:a",))
    assert ok.images == ("data:a",)
    bad = CallOutput(10, archive=False).close(Outcome(error="x"), timeout_ms=0, images=("data:a",))
    assert bad.images == ()


@given(
    deltas=st.lists(st.text(max_size=12), max_size=12),
    limit=st.integers(min_value=-2, max_value=40),
    outcome=OUTCOMES,
    note=st.none() | st.text(min_size=1, max_size=8),
    sent_until=st.integers(min_value=0, max_value=12),
    compat=st.none() | st.text(max_size=30),
    images=st.lists(st.text(min_size=1, max_size=5), max_size=2).map(tuple),
)
def test_closeout_properties(
    deltas: list[str],
    limit: int,
    outcome: Outcome,
    note: str | None,
    sent_until: int,
    compat: str | None,
    images: tuple[str, ...],
) -> None:
    out = CallOutput(limit, archive=True)
    streamed: list[str] = []
    for index, delta in enumerate(deltas):
        visible = out.accept(delta)
        if not visible:
            continue
        if index >= sent_until:
            break  # this send was cancelled, and a cancelled tool emits nothing more
        out.sent(visible)
        streamed.append(visible)
    if compat is not None:
        out.replace(compat)
    closing = out.close(outcome, timeout_ms=7, note=note, images=images)
    stop, marker = classify(outcome, 7)
    assert "".join(streamed) + "".join(closing.deltas) == closing.output
    assert closing.output
    assert closing.stop_reason == stop
    if marker:
        assert closing.output.endswith(marker)
    if note:
        assert note in closing.output
    if stop != "completed":
        assert closing.images == ()
    else:
        assert closing.images == images

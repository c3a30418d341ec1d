"""DESIGN §2 for the server: a session's life over HTTP touches no file on the loop's thread.

The same watch as ``tests/test_loop_files.py`` (every builtin file-system call penguin's
code makes on the loop's thread, ``/proc`` left out), here around what a browser does:
list the sessions, create one, run a task whose command waits for an approval, answer
it, read the session back, and delete it.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from ..test_loop_files import loop_file_calls
from .support import (
    SESSIONS,
    ScriptedModel,
    calls,
    create_session,
    exec_command,
    open_stream,
    read_file,
    say,
    start_task,
)


async def test_design_2_a_server_session_makes_no_file_system_call_on_the_loop_thread(
    client: httpx.AsyncClient, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("hello\n")
    task = model.script(
        "look and write",
        calls(read_file("notes.txt")),
        calls(exec_command("echo done > out.txt")),
        say("Done."),
    )
    with loop_file_calls() as seen:
        assert (await client.get(SESSIONS)).status_code == 200
        created = await create_session(client, approvalMode="always-ask", workspace=str(workspace))
        sid = created["sessionId"]
        async with open_stream(client, sid) as stream:
            await start_task(client, sid, task)
            for _ in range(2):
                asked = await stream.until_type("approval_request")
                call_id = asked.data["toolCall"]["payload"]["tool_call_id"]
                answered = await client.post(
                    f"/api/sessions/{sid}/approvals/{call_id}", json={"decision": "allow"}
                )
                assert answered.status_code == 204
            await stream.until_idle()
        assert (await client.get(f"/api/sessions/{sid}")).status_code == 200
        assert (await client.delete(f"/api/sessions/{sid}")).status_code in (200, 204)
    assert (workspace / "out.txt").read_text() == "done\n"
    assert seen == [], "\n".join(seen)

"""The default toolset: the eleven builtin tool definitions of reference 3.1.

This module owns what the model is told about each builtin tool — the tool
descriptions, the argument schemas, and the harness-side settings (permission,
time limit, output limit, forModel, call_description) — in the spec's order. It
does not own the implementations (``penguin.environment.tools``), which never read
these schemas (reference 3.1.3), nor the choice of tools for a particular model
(``_select``).

Invariants: the names, property names and types, ``required`` lists, limits and
the text of every ``description`` argument are the reference's, exactly; the prose
is penguin's own. No schema carries a JSON-Schema ``default`` key: defaults are
stated in prose, where the model actually reads them. Every call to
:func:`default_tools` builds new dictionaries, so no caller can alter another's
defaults.
"""

from __future__ import annotations

from typing import Any, Final

from ._tools import ForModel, Permission, ToolDefinitionConfig

__all__ = ["SUBAGENT_TOOL_NAMES", "default_tools"]

#: The tools a depth-1 child session does not get (reference 3.8.9, 6.4).
SUBAGENT_TOOL_NAMES: Final = frozenset({"run_subagent", "input_subagent", "kill_subagent"})

# Reference 3.1.1: the exact text of every `description` argument.
_DESCRIPTION_ARGUMENT: Final = (
    "Required, and emit it first, before the other arguments: it is shown to the user "
    "while the call runs. One short sentence describing what this call is doing and why, "
    "written in the user's language."
)

_PATH_RULES: Final = (
    "Relative paths resolve against the workspace; absolute paths work anywhere; "
    "`~` is not expanded."
)

_READ_FILE: Final = f"""\
Read a text file. Each line comes back numbered, as `cat -n` shows it: the 1-based \
line number right-aligned in six columns, a tab, then the line's text. Lines longer \
than 2000 characters are cut short.

Reads at most `limit` lines (2000 unless given) starting at line `offset` (1 unless \
given). When more of the file remains, the last line of the result gives the total \
line count and the range shown; call again with a larger `offset` to continue. Files \
with CRLF line endings are flagged.

{_PATH_RULES} Binary files (containing NUL bytes) are refused: use read_image for \
images and shell commands for other binary formats. Files holding the user's secrets \
(`.vault.toml`, `.project_config.toml`) are never read. Prefer this tool to `cat`, \
`head` or `sed` through exec_command."""

_EDIT_FILE: Final = f"""\
Replace exact text in an existing file.

`old_string` must match the file's current content exactly, whitespace and \
indentation included, and must occur exactly once unless `replace_all` is true. If \
it is not found, or is found more than once, the file is left untouched and the \
error says which; add surrounding lines to `old_string` to make it unique. Read the \
file first, and never include the line-number prefixes that read_file adds. In a \
file with CRLF line endings a multi-line `old_string` must contain the `\\r` \
characters.

The file is rewritten atomically and keeps its permissions. The result reports how \
many occurrences were replaced and shows the change as a unified diff with a few \
lines of context. {_PATH_RULES} To create a file, or to rewrite most of one, use \
write_file."""

_WRITE_FILE: Final = f"""\
Write a file with exactly the given `content`, creating it (and any missing parent \
directories) or replacing its whole content.

The write is atomic and an existing file keeps its permissions. The result reports \
whether the file was created or overwritten, its line and byte counts, and for an \
overwrite a diff against the previous content (or a summary when the diff is too \
large). {_PATH_RULES} To change part of an existing file, prefer edit_file: it does \
not need the whole file resent."""

_EXEC_COMMAND: Final = """\
Run a shell command line with bash, in the user's login environment (like \
`bash -lc`), and stream back its output: stdout and stderr merged in the order they \
were written.

The command runs in `workdir`, or the current working directory (the workspace) \
when that is not given. By default it has no terminal: stdin is a pipe, so \
interactive programs see no TTY, and pagers, colors and git's editor and password \
prompts are switched off. Set `tty` to true for a program that needs a terminal (a \
REPL, a password prompt read with `read -s`): it then runs on a pseudo-terminal, and \
the terminal echoes what input_command types.

The call waits up to `yield_time_ms` (60000 unless given) for the command to exit. \
A non-zero exit code or a terminating signal is reported at the end of the output \
and makes the call fail. A command still running when the wait ends is left running \
and the result gives its `process_id` (like `proc-1a2b3c4d`): use input_command with \
it to read more output or send input, and kill_command to stop it. The wait is \
shortened when it would outlast the call's own time limit.

For long-running work such as servers, watchers or builds you do not want to wait \
for, set `run_in_background` to true: the call returns at once with a `process_id`, \
and a message reporting the exit status and final output arrives by itself when the \
command finishes, so there is no need to poll.

Never start background processes with `&`, `nohup`, `setsid` or `disown`: when the \
foreground command exits, its whole process group is killed, so they die with it. \
Use `run_in_background` instead."""

_INPUT_COMMAND: Final = """\
Interact with a command that exec_command left running, identified by its \
`process_id`.

With non-empty `chars`, they are written to the command's stdin exactly as given \
(no newline is added: end a line with "\\n"), then output is collected for \
`yield_time_ms` (250 unless given). With `chars` empty or omitted, nothing is \
written and the call waits for new output for `yield_time_ms` (120000 unless \
given), returning early if the command exits. To interrupt the command as Ctrl-C \
would, send `chars` consisting of the single character "\\u0003" and nothing else.

The result holds only output you have not seen yet, and ends with a note saying \
whether the command is still running or how it exited. Once it has exited it is \
removed and its `process_id` stops working. Interrupting this call does not stop the \
command."""

_KILL_COMMAND: Final = """\
Stop a command that exec_command left running: its whole process group gets \
SIGTERM, then SIGKILL after a short grace period. Output not yet delivered is \
returned first. The `process_id` is removed afterwards; if the command had already \
exited, the result says how, and the entry is simply cleared. A killed background \
command sends no completion message."""

_RUN_SUBAGENT: Final = """\
Hand a self-contained task to a subagent: a separate agent session, with its own \
context and tools, working in the same workspace. It cannot start subagents of its \
own, and its tool calls are approved the same way as yours. Its text streams back as \
this call's output.

The subagent sees nothing of this conversation except `prompt`, so the prompt must \
stand alone: the goal, the relevant files and facts, the constraints, and the form \
of the answer you want back. Start the prompt with a first line `Caller agent: <id>` \
naming your own agent id, so the subagent knows who is asking.

The call waits up to `yield_time_ms` (300000 unless given) for the subagent to \
finish. If it is still working then, it keeps going and the result gives its \
`subagent_id` (like `subagent-1a2b3c4d`): use input_subagent to collect its progress \
or, once it is idle, to give it a follow-up task; use kill_subagent to stop it. With \
`run_in_background` true the call returns at once and a message arrives by itself \
each time the subagent finishes a task. At most 8 subagents can be kept at a time.

Unless told otherwise the subagent uses your model and your thinking level: \
`model_id` and `provider`, always given together, choose another model, and \
`thinking_level` another reasoning effort."""

_INPUT_SUBAGENT: Final = """\
Check on, or continue, a subagent that run_subagent left registered, identified by \
its `subagent_id`.

With `prompt` empty or omitted, the call collects the subagent's progress for up to \
`yield_time_ms` (10000 unless given); output it produced since you last looked comes \
first. When the subagent is idle (it finished its task), a non-empty `prompt` starts \
a follow-up task in the same session, which still has its earlier context, and the \
call waits up to `yield_time_ms` (300000 unless given). A prompt sent while the \
subagent is still working is refused: poll until it is idle first.

Interrupting this call does not stop the subagent; kill_subagent does."""

_KILL_SUBAGENT: Final = """\
Stop a subagent and remove it. A working subagent is aborted (tool calls of its that \
are waiting for approval are denied); an idle one is released. Text it produced that \
you have not seen yet is returned first, and its own trace keeps the work it did. A \
killed background subagent sends no completion message."""

_IMAGE_SOURCES: Final = (
    "`source` is a local file path (absolute, or relative to the workspace) or an "
    "http:// or https:// URL. PNG, JPEG, GIF and WebP images up to 5 MB are supported."
)

_READ_IMAGE: Final = f"""\
Look at an image: it is attached to the result so you can see it, after a line \
giving its type and size. {_IMAGE_SOURCES}"""

_DESCRIBE_IMAGE: Final = f"""\
Have the project's vision model describe an image, for when you cannot view images \
yourself; its description streams back as text. {_IMAGE_SOURCES} Use `prompt` to ask \
for exactly what you need (the text shown, numbers, layout, an error message); \
without one you get a general, detailed description. Fails when the project has no \
vision model configured."""

_SOURCE: Final = "Path of the image file, or its http:// or https:// URL."


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _number(description: str) -> dict[str, Any]:
    return {"type": "number", "description": description}


def _boolean(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


def _described_by_caller() -> dict[str, Any]:
    return _string(_DESCRIPTION_ARGUMENT)


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def _tool(
    name: str,
    description: str,
    parameters: dict[str, Any],
    *,
    permission: Permission,
    timeout_ms: int,
    max_output_length: int = 16_000,
    for_model: ForModel | None = None,
) -> ToolDefinitionConfig:
    return ToolDefinitionConfig(
        name=name,
        description=description,
        parameters=parameters,
        permission=permission,
        for_model=for_model,
        timeout_ms=timeout_ms,
        max_output_length=max_output_length,
        # Reference 3.1.1: true on the six entries with a `description` argument; on the
        # others the reference leaves it unset, which is the same default, true.
        call_description=True,
    )


def default_tools() -> list[ToolDefinitionConfig]:
    """The default toolset, in the spec's order (read_file ... describe_image).

    Every call returns new objects with new parameter dictionaries: callers may
    keep, filter or even mutate what they get without affecting anyone else.
    """
    return [
        _tool(
            "read_file",
            _READ_FILE,
            _schema(
                {
                    "file_path": _string(
                        "Path of the file to read: absolute, or relative to the workspace."
                    ),
                    "offset": _number(
                        "1-based number of the first line to show. Defaults to 1; use it "
                        "to page through a long file."
                    ),
                    "limit": _number("How many lines to show at most. Defaults to 2000."),
                },
                ["file_path"],
            ),
            permission="r",
            timeout_ms=30_000,
            max_output_length=64_000,
        ),
        _tool(
            "edit_file",
            _EDIT_FILE,
            _schema(
                {
                    "file_path": _string(
                        "Path of the file to edit: absolute, or relative to the workspace. "
                        "The file must already exist."
                    ),
                    "old_string": _string(
                        "The exact text to replace, as it appears in the file now. Must not "
                        "be empty."
                    ),
                    "new_string": _string(
                        "The text to put in its place. Must differ from old_string; empty "
                        "deletes old_string."
                    ),
                    "replace_all": _boolean(
                        "Replace every occurrence of old_string instead of requiring it to be "
                        "unique. Defaults to false."
                    ),
                },
                ["file_path", "old_string", "new_string"],
            ),
            permission="rw",
            timeout_ms=30_000,
        ),
        _tool(
            "write_file",
            _WRITE_FILE,
            _schema(
                {
                    "file_path": _string(
                        "Path of the file to write: absolute, or relative to the workspace."
                    ),
                    "content": _string(
                        "The complete new content of the file, written as given (no "
                        "newline is added at the end). May be empty."
                    ),
                },
                ["file_path", "content"],
            ),
            permission="rw",
            timeout_ms=30_000,
        ),
        _tool(
            "exec_command",
            _EXEC_COMMAND,
            _schema(
                {
                    "description": _described_by_caller(),
                    "cmd": _string(
                        "The command line to run, interpreted by bash: pipes, redirections, "
                        "`&&` and quoting work as usual."
                    ),
                    "workdir": _string(
                        "Directory to run the command in: absolute, or relative to the "
                        "workspace. Defaults to the current working directory (the "
                        "workspace)."
                    ),
                    "yield_time_ms": _number(
                        "How many milliseconds to wait for the command to exit before "
                        "returning with its process_id and leaving it running. Defaults to "
                        "60000; values below 250 count as 250."
                    ),
                    "run_in_background": _boolean(
                        "Return at once with a process_id and report the command's completion "
                        "later in a message of its own. Defaults to false."
                    ),
                    "tty": _boolean(
                        "Run the command on a pseudo-terminal (its controlling terminal) "
                        "instead of pipes, for programs that need one. Defaults to false."
                    ),
                },
                ["description", "cmd"],
            ),
            permission="rw",
            timeout_ms=120_000,
        ),
        _tool(
            "input_command",
            _INPUT_COMMAND,
            _schema(
                {
                    "description": _described_by_caller(),
                    "process_id": _string(
                        "The process_id that exec_command reported (like proc-1a2b3c4d)."
                    ),
                    "chars": _string(
                        'Text to write to the command\'s stdin, exactly as given: add "\\n" to '
                        'end a line. "\\u0003" alone sends Ctrl-C. Empty or omitted: only '
                        "wait for new output."
                    ),
                    "yield_time_ms": _number(
                        "How many milliseconds to collect output before returning. Defaults "
                        "to 250 when chars are written and to 120000 when only polling; "
                        "values below 250 count as 250."
                    ),
                },
                ["description", "process_id"],
            ),
            permission="rw",
            timeout_ms=130_000,
        ),
        _tool(
            "kill_command",
            _KILL_COMMAND,
            _schema(
                {
                    "description": _described_by_caller(),
                    "process_id": _string("The process_id of the command to stop."),
                },
                ["description", "process_id"],
            ),
            permission="rw",
            timeout_ms=30_000,
        ),
        _tool(
            "run_subagent",
            _RUN_SUBAGENT,
            _schema(
                {
                    "description": _described_by_caller(),
                    "prompt": _string(
                        "The complete, self-contained task, starting with the line "
                        "`Caller agent: <id>` (your own agent id). The subagent sees nothing "
                        "else of this conversation."
                    ),
                    "agent_id": _string(
                        "Id of an existing agent to run the subagent as, with that agent's "
                        "own configuration. Omit it unless a particular agent is wanted."
                    ),
                    "model_id": _string(
                        "Model for the subagent; give provider with it. Omit both to use "
                        "your own model."
                    ),
                    "provider": _string("Provider of model_id; give both or neither."),
                    "thinking_level": {
                        "type": "string",
                        "enum": ["low", "medium", "high", "xhigh", "max"],
                        "description": (
                            "Reasoning effort for the subagent. Omit it to use your own level."
                        ),
                    },
                    "yield_time_ms": _number(
                        "How many milliseconds to wait for the subagent to finish before "
                        "returning with its subagent_id and leaving it working. Defaults to "
                        "300000; values below 250 count as 250."
                    ),
                    "run_in_background": _boolean(
                        "Return at once with a subagent_id and report each finished task "
                        "later in a message of its own. Defaults to false."
                    ),
                },
                ["description", "prompt"],
            ),
            permission="rw",
            timeout_ms=600_000,
        ),
        _tool(
            "input_subagent",
            _INPUT_SUBAGENT,
            _schema(
                {
                    "description": _described_by_caller(),
                    "subagent_id": _string(
                        "The subagent_id that run_subagent reported (like subagent-1a2b3c4d)."
                    ),
                    "prompt": _string(
                        "A follow-up task for an idle subagent. Empty or omitted: only "
                        "collect its progress."
                    ),
                    "yield_time_ms": _number(
                        "How many milliseconds to wait before returning. Defaults to 300000 "
                        "with a prompt and to 10000 when only polling; values below 250 "
                        "count as 250."
                    ),
                },
                ["description", "subagent_id"],
            ),
            permission="rw",
            timeout_ms=600_000,
        ),
        _tool(
            "kill_subagent",
            _KILL_SUBAGENT,
            _schema(
                {
                    "description": _described_by_caller(),
                    "subagent_id": _string("The subagent_id of the subagent to stop."),
                },
                ["description", "subagent_id"],
            ),
            permission="rw",
            timeout_ms=30_000,
        ),
        _tool(
            "read_image",
            _READ_IMAGE,
            _schema({"source": _string(_SOURCE)}, ["source"]),
            permission="r",
            timeout_ms=60_000,
            for_model="vision",
        ),
        _tool(
            "describe_image",
            _DESCRIBE_IMAGE,
            _schema(
                {
                    "source": _string(_SOURCE),
                    "prompt": _string(
                        "What to ask the vision model about the image. Omit it for a "
                        "general, detailed description including any visible text."
                    ),
                },
                ["source"],
            ),
            permission="r",
            timeout_ms=90_000,
            for_model="text-only",
        ),
    ]

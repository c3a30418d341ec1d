"""The root of penguin's exceptions, and the whole tree drawn once.

Every exception class penguin defines is a :class:`PenguinError`, so ``except
penguin.PenguinError`` catches each of them and nothing penguin merely lets through (a
``KeyError`` from a custom tool, trio's ``Cancelled``, the operating system's own
``OSError`` of a failed trace write). Each class also keeps the builtin it reads as — a
``ValueError`` for input that is wrong, a ``RuntimeError`` for a call at the wrong
time, an ``OSError`` for a failed write — so ``except ValueError`` and the like catch
what they always did. Plain builtins are still raised for a call that is simply
malformed (a ``ValueError`` for two custom tools of one name, a ``TypeError`` for an
``Environment`` built without ``open``); they have no class of their own.
Each package's own ``_errors`` module defines (and draws) its subtree; this module
holds only the root and the one class of ``penguin.agent``::

    Exception
     └── PenguinError
          │  penguin.protocol (protocol/_errors.py)
          ├── ProtocolError                  (ValueError) not a valid OmniMessage
          │  penguin.config (config/_errors.py)
          ├── ConfigError                    (ValueError) a configuration file cannot be used
          │    └── ConfigValueError          a value given directly is not allowed
          │         └── InvalidIdError       a project, agent or session id breaks the id rule
          │  penguin.approval (approval/_errors.py)
          ├── ApprovalModeError              (ValueError) not one of the four approval modes
          ├── PolicyPatternError             (ValueError) a policy rule's regex does not compile
          │  penguin.trace (trace/_errors.py)
          ├── TraceError                     a trace file itself is the problem
          │    ├── MalformedTraceError       (ValueError) a strict read met a bad line
          │    ├── TraceAppendError          (OSError) a record could not be appended whole
          │    └── TraceWriteError           (OSError) the disk refused a record; none of it kept
          │  penguin.llm (llm/_errors.py)
          ├── LLMStreamError                 a request ended abnormally (internal to a client)
          │  penguin.environment (environment/_errors.py)
          ├── WorkspaceError                 (ValueError) the workspace is not a directory
          ├── EnvironmentClosedError         (RuntimeError) a call after the Environment closed
          ├── SubagentSpawnError             a subagent did not start; alias SubagentStartError
          │    └── SubagentSupervisorClosedError   the subagent supervisor is closed
          ├── SpawnError                     a command did not start
          │    └── SupervisorClosedError     the command supervisor is closed
          ├── DuplicateSessionError          (ValueError) a session id registered twice
          ├── McpCallError                   an MCP request got no result (becomes an output)
          │  penguin.environment (environment/tools/_images.py)
          ├── ImageError                     an image could not be loaded
          │    ├── ImageReadError
          │    ├── ImageDownloadError
          │    ├── EmptyImageError
          │    ├── ImageTooLargeError
          │    └── UnsupportedImageError
          │  penguin.engine (engine/_errors.py)
          ├── EngineBusyError                (RuntimeError) a run is already live
          │  penguin.batch (batch/_errors.py)
          ├── TaskFileError                  (ValueError) a task file's line is not a valid task
          ├── BatchOptionError               (ValueError) a batch cannot run with these options
          ├── BackendUnavailableError        (RuntimeError) ray is not installed, or unusable
          ├── ResultsWriteError              (OSError) a result line could not be written whole
          ├── StorageFullError               (OSError) a task found its disk full: the batch stops
          ├── ModelUnreachableError          (RuntimeError) a task's model cannot be reached: stops
          ├── ModelRateLimitedError          (RuntimeError) a task's model kept answering 429: stops
          │  penguin.server (server/_errors.py)
          ├── ApiError                       a request the server refuses: status + code
          │    └── BodyTooLarge              413 payload_too_large, found while reading a body
          ├── UiFolderError                  (ValueError) --ui names no folder with an index.html
          │  penguin.trace (trace/_lock.py; also penguin.SessionLockedError)
          ├── SessionLockedError             (RuntimeError) another process writes the session
          │  penguin (this module; raised by penguin/agent.py)
          ├── SessionNotFoundError           (LookupError) no trace of that session id
          │  penguin (this module; raised by penguin/environment/sandbox)
          └── SandboxUnavailableError        (RuntimeError) the kernel cannot enforce the sandbox

A few modules also keep a private exception for their own control flow (a too-large
environment dump, a file that is not a regular file, a usage error of ``penguin
config``); they are PenguinErrors too, but never leave the module that raises them.

Nothing a tool call, a model request or an approver does crosses the Environment's or
the engine's interface as an exception: those outcomes become messages with a
``stop_reason`` (reference D7). The exceptions above are about using penguin wrongly
or about a resource penguin could not use, and their messages say what to do next.

This module imports nothing from penguin, so every layer can import it.
"""

from __future__ import annotations

from typing import final

__all__ = ["PenguinError", "SandboxUnavailableError", "SessionNotFoundError"]


class PenguinError(Exception):
    """The base class of every exception penguin defines; catch it to catch them all.

    It adds nothing of its own: the data an error carries (``path``, ``line``,
    ``status``, ...) belongs to each subclass, and each subclass also derives from the
    builtin it reads as (``ValueError``, ``RuntimeError``, ``OSError``, ...).
    """


@final
class SessionNotFoundError(PenguinError, LookupError):
    """No trace of that session id under this agent."""


@final
class SandboxUnavailableError(PenguinError, RuntimeError):
    """A sandbox mode was chosen that this machine cannot enforce (spec/sandbox.md X3.1).

    The message is ``sandbox unavailable: <reason>; use --sandbox off to run without it``;
    ``reason`` is the reason alone.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"sandbox unavailable: {reason}; use --sandbox off to run without it")
        self.reason = reason

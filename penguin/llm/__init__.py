"""penguin.llm: the model side of the agent loop.

What the engine uses, and nothing that knows about tools, approval or traces:

- the interface (:class:`LLM`, :class:`LLMRequest`, :class:`LLMResponse`,
  :class:`LLMOutcome`, :class:`ModelRef`): one request in, a stream of OmniMessage
  fragments and complete messages out, errors as a stop reason, never as an
  exception;
- :class:`OpenAIChatLLM`: the OpenAI Chat Completions streaming client over httpx,
  which reaches every OpenAI-compatible server;
- :class:`ScriptedLLM` and its script builders (:func:`turn`, :func:`text`,
  :func:`thinking`, :func:`tool_call`, :func:`pause`, :func:`usage`,
  :func:`error`): a deterministic model for tests, demos and benchmarks.

``penguin.llm.testing`` (imported separately) serves a local OpenAI-compatible
endpoint for tests. Retries, backoff and the request/usage events are the engine's.

::

    from penguin import protocol as om
    from penguin.llm import LLMRequest, ScriptedLLM, text, turn

    llm = ScriptedLLM([turn(text("Hello", " there"))])
    request = LLMRequest(system_prompt="Be brief.", messages=(om.user_text("Hi"),), tools=())
    async with llm.stream(request) as response:
        async for message in response:
            ...
    assert response.outcome.status == "completed"
"""

from __future__ import annotations

from ._chat_request import REASONING_EFFORTS as REASONING_EFFORTS
from ._interface import LLM as LLM
from ._interface import THINKING_LEVELS as THINKING_LEVELS
from ._interface import ClosableLLM as ClosableLLM
from ._interface import LLMOutcome as LLMOutcome
from ._interface import LLMRequest as LLMRequest
from ._interface import LLMResponse as LLMResponse
from ._interface import ModelRef as ModelRef
from ._openai import OpenAIChatLLM as OpenAIChatLLM
from ._scripted import ErrorStep as ErrorStep
from ._scripted import PauseStep as PauseStep
from ._scripted import ScriptedLLM as ScriptedLLM
from ._scripted import ScriptedTurn as ScriptedTurn
from ._scripted import Step as Step
from ._scripted import TextStep as TextStep
from ._scripted import ThinkingStep as ThinkingStep
from ._scripted import ToolCallStep as ToolCallStep
from ._scripted import Turn as Turn
from ._scripted import UsageStep as UsageStep
from ._scripted import error as error
from ._scripted import pause as pause
from ._scripted import text as text
from ._scripted import thinking as thinking
from ._scripted import tool_call as tool_call
from ._scripted import turn as turn
from ._scripted import usage as usage

__all__ = [
    "LLM",
    "REASONING_EFFORTS",
    "THINKING_LEVELS",
    "ClosableLLM",
    "ErrorStep",
    "LLMOutcome",
    "LLMRequest",
    "LLMResponse",
    "ModelRef",
    "OpenAIChatLLM",
    "PauseStep",
    "ScriptedLLM",
    "ScriptedTurn",
    "Step",
    "TextStep",
    "ThinkingStep",
    "ToolCallStep",
    "Turn",
    "UsageStep",
    "error",
    "pause",
    "text",
    "thinking",
    "tool_call",
    "turn",
    "usage",
]

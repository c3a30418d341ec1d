"""Approval of tool calls: the four modes, consulting an approver, the command policy.

Users import from here; the private modules may move::

    from penguin import approval

    mode = approval.parse_approval_mode(" Read-Only ")        # ApprovalModeError if invalid
    allowed = approval.AllowList()                           # one per session (chat.md C5.4)
    approve = approval.approver(mode, env.tool_permission, ask=prompt, allow_list=allowed)
    guarded = approval.with_command_policy(approve, approval.CommandPolicy.from_config(table))
    verdict = await approval.consult(guarded, call)          # "allow" | "deny" | "forbidden"
    outcome = await guarded.decide(call)                     # Approval(verdict, policy_rule)

An approver is a :data:`~penguin.protocol.ApproveFn`: called with a ``tool_call``
message, answering ``"allow"``, ``"deny"`` or ``"forbidden"``, directly or as an
awaitable. :func:`consult` is how it is always called: no approver, an approver that
raises and an approver that answers nonsense all deny. The command policy
(:class:`CommandPolicy`, :data:`FACTORY_RULES`) forbids the plain spellings of
well-known disasters in ``exec_command``/``input_command`` before any approver is
asked. :func:`approver` is the one factory the surfaces build their approver with
(the mode, the session's :class:`AllowList`, a person's :class:`Answer` — allow for
the session, or deny with a reason that :func:`denial_output` gives the model);
:func:`approver_for_mode` is the plain mode alone. The prompt helpers (:data:`PROMPT`,
:func:`read_run_answer`, :func:`read_chat_answer`, :func:`verdict_label`) are the CLI's
words, without its I/O.
"""

from __future__ import annotations

from penguin.protocol import ApprovalVerdict as ApprovalVerdict
from penguin.protocol import ApproveFn as ApproveFn

from ._allow import AllowList as AllowList
from ._allow import Answer as Answer
from ._allow import command_words as command_words
from ._approver import Ask as Ask
from ._approver import ModeApprover as ModeApprover
from ._approver import approver as approver
from ._consult import DENIED_BY_POLICY as DENIED_BY_POLICY
from ._consult import DENIED_BY_USER as DENIED_BY_USER
from ._consult import VERDICTS as VERDICTS
from ._consult import Approval as Approval
from ._consult import PolicyApprover as PolicyApprover
from ._consult import consult as consult
from ._consult import decide as decide
from ._consult import denial_output as denial_output
from ._consult import with_command_policy as with_command_policy
from ._errors import ApprovalModeError as ApprovalModeError
from ._errors import PolicyPatternError as PolicyPatternError
from ._factory import FACTORY_RULES as FACTORY_RULES
from ._modes import APPROVAL_MODES as APPROVAL_MODES
from ._modes import DEFAULT_APPROVAL_MODE as DEFAULT_APPROVAL_MODE
from ._modes import ApprovalMode as ApprovalMode
from ._modes import PermissionLookup as PermissionLookup
from ._modes import approver_for_mode as approver_for_mode
from ._modes import parse_approval_mode as parse_approval_mode
from ._policy import EVALUATED_ARGUMENTS as EVALUATED_ARGUMENTS
from ._policy import CommandPolicy as CommandPolicy
from ._policy import command_of as command_of
from ._policy import command_segments as command_segments
from ._policy import command_variants as command_variants
from ._prompt import APPROVED_LABEL as APPROVED_LABEL
from ._prompt import CHAT_PROMPT as CHAT_PROMPT
from ._prompt import DENIED_LABEL as DENIED_LABEL
from ._prompt import FORBIDDEN_LABEL as FORBIDDEN_LABEL
from ._prompt import PROMPT as PROMPT
from ._prompt import REASK as REASK
from ._prompt import REASON_PROMPT as REASON_PROMPT
from ._prompt import parse_prompt_answer as parse_prompt_answer
from ._prompt import read_chat_answer as read_chat_answer
from ._prompt import read_run_answer as read_run_answer
from ._prompt import verdict_label as verdict_label
from ._rules import PolicyRule as PolicyRule

__all__ = [
    "APPROVAL_MODES",
    "APPROVED_LABEL",
    "CHAT_PROMPT",
    "DEFAULT_APPROVAL_MODE",
    "DENIED_BY_POLICY",
    "DENIED_BY_USER",
    "DENIED_LABEL",
    "EVALUATED_ARGUMENTS",
    "FACTORY_RULES",
    "FORBIDDEN_LABEL",
    "PROMPT",
    "REASK",
    "REASON_PROMPT",
    "VERDICTS",
    "AllowList",
    "Answer",
    "Approval",
    "ApprovalMode",
    "ApprovalModeError",
    "ApprovalVerdict",
    "ApproveFn",
    "Ask",
    "CommandPolicy",
    "ModeApprover",
    "PermissionLookup",
    "PolicyApprover",
    "PolicyPatternError",
    "PolicyRule",
    "approver",
    "approver_for_mode",
    "command_of",
    "command_segments",
    "command_variants",
    "command_words",
    "consult",
    "decide",
    "denial_output",
    "parse_approval_mode",
    "parse_prompt_answer",
    "read_chat_answer",
    "read_run_answer",
    "verdict_label",
    "with_command_policy",
]

"""Approval of tool calls: the four modes, consulting an approver, the command policy.

Users import from here; the private modules may move::

    from penguin import approval

    mode = approval.parse_approval_mode(" Read-Only ")        # ApprovalModeError if invalid
    approve = approval.approver_for_mode(mode, ask=prompt, permission=env.tool_permission)
    guarded = approval.with_command_policy(approve, approval.CommandPolicy.from_config(table))
    verdict = await approval.consult(guarded, call)          # "allow" | "deny" | "forbidden"
    outcome = await guarded.decide(call)                     # Approval(verdict, policy_rule)

An approver is a :data:`~penguin.protocol.ApproveFn`: called with a ``tool_call``
message, answering ``"allow"``, ``"deny"`` or ``"forbidden"``, directly or as an
awaitable. :func:`consult` is how it is always called: no approver, an approver that
raises and an approver that answers nonsense all deny. The command policy
(:class:`CommandPolicy`, :data:`FACTORY_RULES`) forbids the plain spellings of
well-known disasters in ``exec_command``/``input_command`` before any approver is
asked. The prompt helpers (:data:`PROMPT`, :func:`parse_prompt_answer`,
:func:`verdict_label`) are the CLI's words, without its I/O.
"""

from __future__ import annotations

from penguin.protocol import ApprovalVerdict as ApprovalVerdict
from penguin.protocol import ApproveFn as ApproveFn

from ._consult import VERDICTS as VERDICTS
from ._consult import Approval as Approval
from ._consult import PolicyApprover as PolicyApprover
from ._consult import consult as consult
from ._consult import decide as decide
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
from ._policy import command_variants as command_variants
from ._prompt import APPROVED_LABEL as APPROVED_LABEL
from ._prompt import DENIED_LABEL as DENIED_LABEL
from ._prompt import FORBIDDEN_LABEL as FORBIDDEN_LABEL
from ._prompt import PROMPT as PROMPT
from ._prompt import parse_prompt_answer as parse_prompt_answer
from ._prompt import verdict_label as verdict_label
from ._rules import PolicyRule as PolicyRule

__all__ = [
    "APPROVAL_MODES",
    "APPROVED_LABEL",
    "DEFAULT_APPROVAL_MODE",
    "DENIED_LABEL",
    "EVALUATED_ARGUMENTS",
    "FACTORY_RULES",
    "FORBIDDEN_LABEL",
    "PROMPT",
    "VERDICTS",
    "Approval",
    "ApprovalMode",
    "ApprovalModeError",
    "ApprovalVerdict",
    "ApproveFn",
    "CommandPolicy",
    "PermissionLookup",
    "PolicyApprover",
    "PolicyPatternError",
    "PolicyRule",
    "approver_for_mode",
    "command_of",
    "command_variants",
    "consult",
    "decide",
    "parse_approval_mode",
    "parse_prompt_answer",
    "verdict_label",
    "with_command_policy",
]

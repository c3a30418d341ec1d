"""The public surface of ``penguin.approval`` is deliberate."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import penguin.approval as approval

EXPECTED = {
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
}


def test_public_surface() -> None:
    assert len(approval.__all__) == len(set(approval.__all__))
    assert set(approval.__all__) == EXPECTED
    for name in approval.__all__:
        assert hasattr(approval, name), name


def test_public_classes_and_functions_have_docstrings() -> None:
    assert approval.__doc__
    for name in approval.__all__:
        obj = getattr(approval, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), name


def test_every_module_opens_with_a_docstring() -> None:
    for info in pkgutil.walk_packages(approval.__path__, "penguin.approval."):
        module = importlib.import_module(info.name)
        assert (module.__doc__ or "").strip(), info.name


def test_design_surface() -> None:
    import typing

    assert typing.get_args(approval.ApprovalMode) == (
        "allow-all",
        "deny-all",
        "read-only",
        "always-ask",
    )

"""The approval package's exceptions.

::

    PenguinError              the root of every penguin exception (penguin._errors)
     ├── ApprovalModeError    (also ValueError) a text is not one of the four approval modes
     └── PolicyPatternError   (also ValueError) a command-policy rule's pattern is not a
                              valid regex

Approving a tool call never raises: an approver that fails is a ``deny``
(:func:`penguin.approval.consult`). These exceptions are about *configuring*
approval wrongly, and their messages say how to put it right.
"""

from __future__ import annotations

from typing import final

from penguin._errors import PenguinError

__all__ = ["ApprovalModeError", "PolicyPatternError"]


@final
class ApprovalModeError(PenguinError, ValueError):
    """The text given as an approval mode is none of the four modes.

    The message is the spec's line (5.6); ``value`` is the text exactly as given,
    before trimming and lowercasing.
    """

    def __init__(self, value: str) -> None:
        super().__init__(
            f'Invalid approval mode "{value}". Use allow-all, deny-all, read-only, or always-ask.'
        )
        self.value = value


@final
class PolicyPatternError(PenguinError, ValueError):
    """A command-policy rule's ``pattern`` does not compile as a Python regular expression.

    ``rule`` names the rule, ``pattern`` is the offending text and ``reason`` is the
    regex compiler's complaint. :meth:`CommandPolicy.from_config` turns this into a
    warning and skips the rule; constructing a :class:`PolicyRule` directly raises it.
    """

    def __init__(self, rule: str, pattern: str, reason: str) -> None:
        super().__init__(
            f'Command policy rule "{rule}" has a pattern that is not a valid Python regular '
            f"expression ({reason}); fix the pattern or disable the rule."
        )
        self.rule = rule
        self.pattern = pattern
        self.reason = reason

r"""The factory command-policy rules: broad nets for the well-known disasters.

These are the rules a project gets when its configuration names none, and the rules
a new project's ``.project_config.toml`` is seeded with (reference 5.5). Each is a Python
regex searched in the literal and the unquoted spelling of a command (see
:mod:`._policy`). They are deliberately broad, as the reference's are: a command
that destroys data with no undo and slips through is worse than an occasional
everyday command that is refused, and a refused call costs the model one more turn.
They are a safety net for a model that got it wrong, not a sandbox against one that
tries to get round them.

Shared reading of a command (the fragments below):

- *A command word* is a word (``rm``, ``/bin/rm``, ``C:\Windows\format.com``): it
  starts at the beginning, after whitespace, or after one of ``; & | ( ) { } ` !``,
  and may carry a directory part. Any word counts, not only the first of a command,
  so every wrapper is covered without being named (``sudo``, ``env``, ``xargs``,
  ``timeout 5``, ``nice -n 10``, ``bash -c``, ``find -exec``, ``cmd /c`` ...), and
  so is text that only mentions a command (``echo rm -rf x``, ``git rm -rf
  --cached x``): the price of the breadth. A word glued to something else is not one:
  ``X=rm``, ``$(echo rm)``, ``--format=%H`` and ``clang-format`` are not.
- *A segment* is the text between ``;``, ``&`` and ``|``. A rule that needs a
  command word *and* its arguments (``rm`` *and* ``-r`` *and* ``-f``) looks for
  them in one segment, after the segment's first such command word. Parentheses do
  not end a segment. Whitespace runs count as one space, newlines included.
- *Disks and partitions* are the devices under ``/dev/`` whose name starts with
  ``sd``, ``hd``, ``vd``, ``xvd``, ``nvme``, ``mmcblk``, ``loop``, ``disk``, ``rdisk``,
  ``md<N>``, ``dm-<N>`` or ``mapper/``. ``/dev/null``, ``/dev/zero``, ``/dev/tty``,
  ``/dev/stderr``, ``/dev/fd/N`` and the like are not.
- *Not* covered: commands computed at run time (``$X -rf /`` after ``X=rm``, ``eval``,
  a script file), remote commands only the remote shell reads, and globs that only
  name a target once the shell expands them.

Each rule is one linear-time pattern (no backtracking blow-up on hostile input; see
``benchmarks/policy.py``): a segment's first matching command word is found once
and held (an atomic group), and the conditions on its arguments are lookaheads over
the rest of that segment. The rules, in order (first match wins):

``rm-recursive-force``
    ``rm`` with a recursive flag (``-r``, ``-R``, ``--recursive``, alone or bundled
    as in ``-rf``/``-fr``/``-Rfv``) *and* a force flag (``-f``, ``-F``,
    ``--force``), in any order, in one segment — whatever the target: ``rm -rf
    build`` and ``rm -rf /tmp/x`` are forbidden like ``rm -rf /``. Without both
    flags (``rm -r build``, ``rm -f x``) it is allowed.
``mkfs``
    Making a file system: the command word ``mkfs``, ``mkfs.<type>``, ``mke2fs``,
    ``newfs`` or ``newfs_<type>``, whatever follows (an image file too; a file named
    ``mkfs.sh`` too).
``dd-to-block-device``
    ``dd`` with ``of=`` naming a disk or partition (quoted or not).
    ``of=/dev/null`` and ``if=/dev/sda of=disk.img`` (reading a disk) are allowed.
``fork-bomb``
    A shell function that pipes itself into itself in the background:
    ``:(){ :|:& };:`` and its re-spaced and renamed forms (``bomb(){ bomb|bomb& }``,
    ``function f { f | f & }``), wherever it appears: that shape has no other use.
``overwrite-block-device``
    Writing over a disk or partition by a redirection (``> /dev/sda``, ``>>``,
    ``>|``, ``2>``), by ``tee``, by ``cp`` with the device last, or by the wiping
    tools ``shred``, ``wipefs`` and ``blkdiscard``.
``windows-recursive-delete``
    Case-insensitive. PowerShell's ``Remove-Item`` (and its aliases ``ri``, ``rm``,
    ``rmdir``, ``rd``, ``del``, ``erase``) with ``-Recurse`` (or ``-r``, ``-rec``
    ...) *and* ``-Force`` (or ``-f``, ``-fo`` ...), whatever the target; cmd's
    ``rd``/``rmdir``/``del``/``erase`` with ``/s`` *and* ``/q`` (also run together,
    ``/s/q``), whatever the target; and any of these words with ``/s`` or a recursive
    flag alone when a target is a drive root (``C:``, ``C:\``, ``C:\*``, ``\``),
    ``C:\Windows``, ``C:\Users``, ``C:\Program Files``, ``C:\ProgramData``, a
    profile or system variable (``%USERPROFILE%``, ``%SystemRoot%``,
    ``$env:USERPROFILE``, ...) or PowerShell's home (``$HOME``, ``~``) — so a POSIX
    ``rm -r ~`` is caught here too.
``windows-format-volume``
    Case-insensitive. ``format`` or ``format.com`` with a drive letter in its
    segment (``format C:``, ``format /q d:``), and PowerShell's ``Format-Volume``.
    Without a drive letter (``pnpm format``, ``npm run format``) it is allowed.
``windows-disk-overwrite``
    Case-insensitive. Raw disk and volume paths (``\\.\PhysicalDrive0``,
    ``\\.\C:``, also with ``\\?\``) anywhere in the command, PowerShell's
    ``Clear-Disk``, and diskpart's ``clean`` fed through a pipe (``echo clean |
    diskpart``). Reading a raw disk is caught too: an agent has no business with either.
``windows-fork-bomb``
    The batch file that starts itself in a pipe or a loop: ``%0|%0``, ``start %0``.
"""

from __future__ import annotations

from typing import Final

from ._rules import PolicyRule

__all__ = ["FACTORY_RULES"]

# ----------------------------------------------------------------------- fragments

# Characters after which a command word may start (besides whitespace).
_STARTERS: Final = r";&|(){}`!"

# Where a word starts, and the optional directory part of a command word (/bin/,
# C:\Windows\). The directory part stops at the characters a word may start after,
# so that a run of them ("((((") is not rescanned from each one.
_WORD: Final = rf"(?:^|(?<=[\s{_STARTERS}]))(?:[^\s{_STARTERS}]*[/\\])?"

# The rest of the current segment, and the end of a flag or a target.
_REST: Final = r"[^;&|]*"
_END: Final = r"(?=$|[\s;&|)`])"


def _segment_with(command: str, *conditions: str) -> str:
    """A segment whose first ``command`` word is followed, in the segment, by every condition.

    The first such command word of the segment is found once and held (an atomic
    group), and each condition is a lookahead over the rest of the segment: the
    search stays linear however many command words a segment has. Holding the first
    word loses nothing, because what follows a later one follows the first one too.
    """
    lookaheads = "".join(f"(?={_REST}{condition})" for condition in conditions)
    return rf"(?:^|(?<=[;&|]))(?>{_REST}?{_WORD}(?:{command})){lookaheads}"


# Whole disks and partitions, as a prefix of the name under /dev/.
_DEVICE: Final = r"/dev/(?:[hsv]d|xvd|nvme|mmcblk|loop|r?disk|md\d|dm-\d|mapper/)"
_QUOTE: Final = "[\"']?"

_WIN_ALL: Final = r"(?:\*(?:\.\*)?)?"  # \*, \*.*
_WIN_VARIABLES: Final = (
    "homedrive|programdata|programfiles|systemdrive|systemroot|userprofile|windir"
)
_WIN_TARGET: Final = (
    rf"{_QUOTE}(?:"
    r"[a-z]:(?:[\\/](?:windows|users|program files(?: \(x86\))?|programdata))?"
    rf"|\\|%(?:{_WIN_VARIABLES})%(?:%homepath%)?|\$env:(?:{_WIN_VARIABLES})|\$home|~"
    rf")[\\/]?{_WIN_ALL}{_QUOTE}"
)
_WIN_NOT_WORD: Final = r"(?![a-z0-9])"
_PS_RECURSE: Final = rf"\s-r(?:ec[a-z]*|e)?(?::\$true)?{_END}"
_PS_FORCE: Final = rf"\s-f(?:o(?:r(?:ce?)?)?)?(?::\$true)?{_END}"

# ------------------------------------------------------------------------- the rules

_RM_RECURSIVE_FORCE: Final = _segment_with(
    r"rm(?=\s)",
    rf"\s(?:-[A-Za-z]*[rR][A-Za-z]*|--recursive){_END}",
    rf"\s(?:-[A-Za-z]*[fF][A-Za-z]*|--force){_END}",
)

_MKFS: Final = rf"{_WORD}(?:mkfs(?:\.\w+)?|mke2fs|newfs(?:_\w+)?)(?![A-Za-z0-9])"

_DD_TO_BLOCK_DEVICE: Final = _segment_with(r"dd(?=\s)", rf"\bof={_QUOTE}{_DEVICE}")

# A function name is taken whole, from where a word starts (a possessive run behind a
# lookbehind), which keeps the search linear on long words.
_NAME_CHAR: Final = r"""[^\s(){}|&;<>'"]"""
_FORK_BOMB: Final = (
    r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&"
    rf"|(?<!{_NAME_CHAR})({_NAME_CHAR}++)\s*\(\s*\)\s*\{{\s*\1\s*\|\s*\1\s*&\s*;?\s*\}}"
    rf"|\bfunction\s+({_NAME_CHAR}++)\s*\{{\s*\2\s*\|\s*\2\s*&\s*;?\s*\}}"
)

_OVERWRITE_BLOCK_DEVICE: Final = (
    rf">\|?\s*{_QUOTE}{_DEVICE}"
    "|"
    + _segment_with(r"(?:tee|shred|wipefs|blkdiscard)(?=\s)", rf"\s{_QUOTE}{_DEVICE}")
    + "|"
    + _segment_with(r"cp(?=\s)", rf"\s{_QUOTE}{_DEVICE}[^\s;&|)`]*{_QUOTE}\s*(?:$|[;&|)`])")
)

# One command word, then any of three sets of conditions on its segment.
_WINDOWS_RECURSIVE_DELETE: Final = (
    "(?i)"
    + _segment_with(rf"(?:remove-item|ri|rm|rmdir|rd|del|erase)(?:\.exe)?{_WIN_NOT_WORD}")
    + rf"(?:(?={_REST}{_PS_RECURSE})(?={_REST}{_PS_FORCE})"
    + rf"|(?={_REST}/s(?![a-z]))(?={_REST}/q(?![a-z]))"
    + rf"|(?={_REST}(?:/s(?![a-z])|{_PS_RECURSE}))(?={_REST}\s{_WIN_TARGET}{_END}))"
)

_WINDOWS_FORMAT_VOLUME: Final = (
    "(?i)"
    + _segment_with(r"format(?:\.com)?(?![a-z0-9-])", rf"\s{_QUOTE}[a-z]:{_WIN_NOT_WORD}")
    + rf"|{_WORD}format-volume{_WIN_NOT_WORD}"
)

_WINDOWS_DISK_OVERWRITE: Final = (
    r"(?i)\\\\[.?]\\(?:physicaldrive\d+|[a-z]:)"
    rf"|{_WORD}clear-disk{_WIN_NOT_WORD}"
    r"|\becho\s+clean(?:\s+all)?\s*\)?\s*\|\s*diskpart\b"
)

_WINDOWS_FORK_BOMB: Final = r"%0\s*\|\s*%0|(?i:\bstart\s+%0)(?!\w)"

FACTORY_RULES: Final[tuple[PolicyRule, ...]] = (
    PolicyRule(
        "rm-recursive-force",
        _RM_RECURSIVE_FORCE,
        description="rm with both a recursive and a force flag (rm -rf ...), whatever the target",
    ),
    PolicyRule(
        "mkfs",
        _MKFS,
        description="making a file system (mkfs, mkfs.<type>, mke2fs, newfs) erases its target",
    ),
    PolicyRule(
        "dd-to-block-device",
        _DD_TO_BLOCK_DEVICE,
        description="dd writing to a disk or partition (of=/dev/sda ...; of=/dev/null is fine)",
    ),
    PolicyRule(
        "fork-bomb",
        _FORK_BOMB,
        description="a shell function that pipes itself into itself in the background",
    ),
    PolicyRule(
        "overwrite-block-device",
        _OVERWRITE_BLOCK_DEVICE,
        description="writing over a disk or partition (> /dev/sda, tee, cp, shred, wipefs)",
    ),
    PolicyRule(
        "windows-recursive-delete",
        _WINDOWS_RECURSIVE_DELETE,
        description="Remove-Item -Recurse -Force, rd /s /q, and recursive deletes of a drive",
    ),
    PolicyRule(
        "windows-format-volume",
        _WINDOWS_FORMAT_VOLUME,
        description="formatting a volume (format C:, Format-Volume)",
    ),
    PolicyRule(
        "windows-disk-overwrite",
        _WINDOWS_DISK_OVERWRITE,
        description=r"raw disk access (\\.\PhysicalDrive0), Clear-Disk, diskpart clean",
    ),
    PolicyRule(
        "windows-fork-bomb",
        _WINDOWS_FORK_BOMB,
        description="the batch file that starts itself (%0|%0, start %0)",
    ),
)
"""The factory rule set, in evaluation order; documented rule by rule in this module."""

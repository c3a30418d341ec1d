r"""The factory command-policy rules: the plain spellings of well-known disasters.

These are the rules a project gets when its configuration names none (reference 5.5).
Each is a Python regex searched in the literal and the unquoted spelling of a
command (see :mod:`._policy`). They aim to catch the usual ways of writing each
disaster and to stay quiet on everyday work; they are a safety net for a model that
got it wrong, not a sandbox against one that tries to get round them.

Shared reading of a command (the fragments below):

- *Command position.* A command word counts only where a command starts: at the
  beginning, after ``;`` ``&`` ``|`` ``(`` ``)`` ``{`` ``}`` `````` ``!`` ``$(`` or
  find's ``-exec``, optionally behind prefixes that run what follows — ``sudo``,
  ``doas``, ``env``, ``VAR=value``, ``nohup``, ``nice``, ``timeout N``, ``time``,
  ``exec``, ``command``, ``builtin``, ``eval``, ``xargs``, ``busybox``, shell keywords
  (``then``, ``do``, ...), a shell's ``-c`` (``bash -c``, ``sh -lc``), ``cmd /c`` and
  ``powershell``/``pwsh`` with their options — and optionally spelled with a path
  (``/bin/rm``). So ``echo "rm -rf /"`` and ``grep 'rm -rf /' notes.md`` pass: their
  ``rm`` is an argument, in the literal and the unquoted spelling alike. Quoted text
  that still reads as a command sequence once its quotes are gone
  (``echo "x; rm -rf /"``) is forbidden: the unquoted spelling is pessimistic by
  design, and saying such a thing is rarely needed.
- *Dangerous targets, not dangerous verbs.* Deleting and formatting are everyday
  work on the workspace; the rules fire only for targets whose loss is
  catastrophic: the file-system root, a top-level system directory, a home directory
  as a whole, a whole disk or partition. Relative paths (``rm -rf ./build``,
  ``rm -rf *``, ``rd /s /q build``) and deep absolute paths (``rm -rf /tmp/x``,
  ``rm -rf ~/.cache/pip``) are allowed: the workspace is the agent's to manage, and a
  relative path's meaning depends on a working directory the policy does not
  evaluate.
- *Not* covered: remote commands (``ssh host 'rm -rf /'``), globs and brace
  expansions that only reach a target once the shell expands them, and anything
  computed at run time.

The rules, in order (first match wins):

``rm-recursive-force``
    ``rm`` with a recursive flag (``-r``, ``-R``, ``--recursive``, alone or bundled as
    in ``-rf``/``-fr``/``-Rfv``) *and* a force flag (``-f``, ``--force``), in any order,
    whose arguments include ``/`` (also ``/*``, ``/.*``, ``//``), a top-level system
    directory (``/usr``, ``/etc``, ``/home``, ``/Users``, ... also with ``/`` or ``/*``),
    a home directory as a whole (``~``, ``~/``, ``~/*``, ``~user``, ``$HOME``,
    ``${HOME}/*``) or ``--no-preserve-root``.
``mkfs``
    Making a file system (``mkfs``, ``mkfs.<type>``, ``mke2fs``, ``newfs``,
    ``newfs_<type>``) on anything under ``/dev/``. On an image file it is allowed.
``dd-to-block-device``
    ``dd`` with ``of=`` naming a disk or partition (``/dev/sda``, ``/dev/nvme0n1p2``,
    ``/dev/mmcblk0``, ``/dev/disk2``, ``/dev/rdisk2``, ``/dev/vdb``, ``/dev/xvda``,
    ``/dev/md0``, ``/dev/dm-0``, ``/dev/mapper/...``, ``/dev/disk/by-id/...``).
    ``of=/dev/null`` and ``if=/dev/sda of=disk.img`` (reading a disk) are allowed.
``fork-bomb``
    A shell function that pipes itself into itself in the background,
    ``:(){ :|:& };:`` and its renamed and re-spaced forms (``bomb(){ bomb|bomb& }``,
    ``function f { f | f & }``), wherever it appears: that shape has no other use.
``overwrite-block-device``
    Writing over a disk or partition (the devices of ``dd-to-block-device``) by a
    shell redirection (``> /dev/sda``, ``cat x > /dev/nvme0n1``, ``>> /dev/sdb``), by
    ``tee``, by ``cp`` with the device as the destination, or by the wiping tools
    ``shred``, ``wipefs`` and ``blkdiscard``. Redirections to ``/dev/null``,
    ``/dev/stderr``, ``/dev/tty`` and the like are allowed.
``windows-recursive-delete``
    ``rd``/``rmdir``/``del``/``erase`` with ``/s`` (``/q`` or not: the confirmation
    prompt is no protection for a model that can answer it), or PowerShell's
    ``Remove-Item`` and its aliases (``ri``, ``rm``, ``rmdir``, ``rd``, ``del``,
    ``erase``) with ``-Recurse`` (or an abbreviation down to ``-r``), whose arguments
    include a drive root (``C:``, ``C:\``, ``C:\*``, ``\``), ``C:\Windows``,
    ``C:\Users``, ``C:\Program Files``, ``C:\ProgramData``, or the profile and system
    variables (``%USERPROFILE%``, ``%SystemRoot%``, ``%windir%``, ``%SystemDrive%``,
    ``%HOMEDRIVE%``, ``$env:USERPROFILE``, ...) or PowerShell's home (``$HOME``, ``~``).
    Case-insensitive, like Windows. Because ``rm -r`` is also PowerShell's spelling,
    a POSIX ``rm -r ~`` without ``-f`` (which deletes everything that is not
    write-protected) is caught by this rule.
``windows-format-volume``
    ``format`` (or ``format.com``) of a drive letter (``format C:``, ``format d: /q``)
    and PowerShell's ``Format-Volume``.
``windows-disk-overwrite``
    Raw disk and volume paths (``\\.\PhysicalDrive0``, ``\\.\C:``, also with
    ``\\?\``) anywhere in the command, PowerShell's ``Clear-Disk``, and diskpart's
    ``clean`` fed through a pipe (``echo clean | diskpart``). Reading a raw disk is
    caught too: an agent has no business with either.
``windows-fork-bomb``
    The batch file that starts itself in a pipe or a loop: ``%0|%0``,
    ``start %0``.
"""

from __future__ import annotations

from typing import Final

from ._rules import PolicyRule

__all__ = ["FACTORY_RULES"]

# ----------------------------------------------------------------------- fragments

# The end of a shell word: whitespace, the end, or a character that ends a command.
_END: Final = r"(?=$|[\s;&|)`])"

# The rest of the current simple command (what a lookahead may scan for arguments).
_ARGS: Final = r"[^;&|()`]*"

_FLAGS: Final = r"(?:\s+-\S+)*"
_ASSIGNMENT: Final = r"[A-Za-z_]\w*=\S*"

# Prefixes that run the command that follows them. Options that take an argument
# are spelled out where the argument could be mistaken for the command; the
# argument never starts with "-", which keeps every prefix unambiguous to parse.
_LAUNCHER: Final = "|".join(
    (
        r"sudo(?:\s+(?:-[CDghpRrTtUu]\s+[^\s-]\S*|-\S+))*",
        r"doas(?:\s+(?:-[Cu]\s+[^\s-]\S*|-\S+))*",
        r"env(?:\s+(?:-[CSu]\s+[^\s-]\S*|-\S+))*",
        _ASSIGNMENT,
        r"(?:builtin|busybox|command|do|elif|else|eval|exec|if|nohup|setsid|then|time"
        rf"|until|while|xargs){_FLAGS}",
        r"nice(?:\s+(?:-n\s+-?\d+|-\S+))*",
        rf"timeout{_FLAGS}\s+\d[\w.]*",
        r"(?:[^\s;&|()]*/)?(?:a|ba|c|da|k|tc|z)?sh(?:\s+-\S+)*?\s+-[A-Za-z]*c[A-Za-z]*",
        r"cmd(?:\.exe)?(?:\s+/\w+)*",
        rf"(?:powershell|pwsh)(?:\.exe)?{_FLAGS}",
    )
)

# Where a command word starts, including an optional directory part (/bin/rm).
_AT_COMMAND: Final = (
    rf"(?:^|[;&|(){{}}`!]|\$\(|\s-exec(?:dir)?\s)\s*(?:(?:{_LAUNCHER})\s+)*"
    r"(?:[^\s;&|()<>]*[/\\])?"
)

_ALL: Final = r"(?:\.?\*)?"  # a trailing glob for "everything in it": *, .*

_UNIX_SYSTEM_DIRS: Final = (
    "Applications|Library|System|Users|Volumes|bin|boot|dev|etc|home|lib|lib32|lib64"
    "|libx32|opt|private|proc|root|run|sbin|srv|sys|usr|var"
)
_UNIX_TARGET: Final = (
    rf"(?:/+{_ALL}|/(?:{_UNIX_SYSTEM_DIRS})/?{_ALL}|~[\w.-]*/?{_ALL}|\$(?:HOME|\{{HOME\}})/?{_ALL})"
)

# Whole disks and partitions (not /dev/null, /dev/tty, /dev/fd/N, /dev/loopN ...).
_BLOCK_DEVICE: Final = (
    r"/dev/(?:(?:[hsv]|xv)d[a-z]+\d*|nvme\d+(?:n\d+)?(?:p\d+)?|mmcblk\d+(?:p\d+)?"
    r"|r?disk\d+(?:s\d+)*|md\d+|dm-\d+|mapper/[\w.-]+|disk/by-[\w-]+/[^\s;&|)`]+)"
)

_WIN_ALL: Final = r"(?:\*(?:\.\*)?)?"  # \*, \*.*
_WIN_VARIABLES: Final = (
    "homedrive|programdata|programfiles|systemdrive|systemroot|userprofile|windir"
)
_WIN_TARGET: Final = (
    r"[\"']?(?:"
    rf"[a-z]:[\\/]?{_WIN_ALL}"
    rf"|\\{_WIN_ALL}"
    rf"|[a-z]:[\\/](?:windows|users|program files(?: \(x86\))?|programdata)[\\/]?{_WIN_ALL}"
    rf"|%(?:{_WIN_VARIABLES})%(?:%homepath%)?[\\/]?{_WIN_ALL}"
    rf"|\$env:(?:{_WIN_VARIABLES})[\\/]?{_WIN_ALL}"
    rf"|(?:\$home|~)[\\/]?{_WIN_ALL}"
    r")[\"']?"
)

# ------------------------------------------------------------------------- the rules

_RM_RECURSIVE_FORCE: Final = (
    rf"{_AT_COMMAND}rm{_END}"
    rf"(?={_ARGS}\s(?:-[A-Za-z]*[rR][A-Za-z]*|--recursive){_END})"
    rf"(?={_ARGS}\s(?:-[A-Za-z]*f[A-Za-z]*|--force){_END})"
    rf"(?={_ARGS}\s(?:{_UNIX_TARGET}{_END}|--no-preserve-root{_END}))"
)

_MKFS: Final = rf"{_AT_COMMAND}(?:mkfs(?:\.\w+)?|mke2fs|newfs(?:_\w+)?){_END}(?={_ARGS}\s/dev/\S)"

_DD_TO_BLOCK_DEVICE: Final = rf"{_AT_COMMAND}dd{_END}(?={_ARGS}\sof={_BLOCK_DEVICE}{_END})"

# A function name is taken whole, from where a word starts (a possessive run behind a
# lookbehind), which keeps the search linear on long words.
_NAME_CHAR: Final = r"[^\s(){}|&;<>'\"]"
_FORK_BOMB: Final = (
    rf"(?<!{_NAME_CHAR})({_NAME_CHAR}++)\s*\(\s*\)\s*\{{\s*\1\s*\|\s*\1\s*&\s*;?\s*\}}"
    rf"|\bfunction\s+({_NAME_CHAR}++)\s*\{{\s*\2\s*\|\s*\2\s*&\s*;?\s*\}}"
)

_OVERWRITE_BLOCK_DEVICE: Final = (
    rf">\|?\s*{_BLOCK_DEVICE}{_END}"
    rf"|{_AT_COMMAND}(?:tee|shred|wipefs|blkdiscard){_END}(?={_ARGS}\s{_BLOCK_DEVICE}{_END})"
    rf"|{_AT_COMMAND}cp{_END}(?={_ARGS}\s{_BLOCK_DEVICE}\s*(?:$|[;&|)`]))"
)

_WINDOWS_RECURSIVE_DELETE: Final = (
    rf"(?i){_AT_COMMAND}(?:rd|rmdir|del|erase|remove-item|ri|rm)(?:\.exe)?{_END}"
    rf"(?={_ARGS}(?:/s(?![a-z])|\s-r(?:e(?:c(?:u(?:r(?:s(?:e)?)?)?)?)?)?(?::\$true)?{_END}))"
    rf"(?={_ARGS}\s{_WIN_TARGET}{_END})"
)

_WINDOWS_FORMAT_VOLUME: Final = (
    rf"(?i){_AT_COMMAND}(?:format(?:\.com)?\s+[\"']?[a-z]:(?=$|[\s\\/\"';&|)])"
    rf"|format-volume{_END})"
)

_WINDOWS_DISK_OVERWRITE: Final = (
    r"(?i)\\\\[.?]\\(?:physicaldrive\d+|[a-z]:)"
    rf"|{_AT_COMMAND}clear-disk{_END}"
    r"|\becho\s+clean(?:\s+all)?\s*\)?\s*\|\s*diskpart\b"
)

_WINDOWS_FORK_BOMB: Final = r"%0\s*\|\s*%0|(?i:\bstart\s+%0)(?!\w)"

FACTORY_RULES: Final[tuple[PolicyRule, ...]] = (
    PolicyRule("rm-recursive-force", _RM_RECURSIVE_FORCE),
    PolicyRule("mkfs", _MKFS),
    PolicyRule("dd-to-block-device", _DD_TO_BLOCK_DEVICE),
    PolicyRule("fork-bomb", _FORK_BOMB),
    PolicyRule("overwrite-block-device", _OVERWRITE_BLOCK_DEVICE),
    PolicyRule("windows-recursive-delete", _WINDOWS_RECURSIVE_DELETE),
    PolicyRule("windows-format-volume", _WINDOWS_FORMAT_VOLUME),
    PolicyRule("windows-disk-overwrite", _WINDOWS_DISK_OVERWRITE),
    PolicyRule("windows-fork-bomb", _WINDOWS_FORK_BOMB),
)
"""The factory rule set, in evaluation order; documented rule by rule in this module."""

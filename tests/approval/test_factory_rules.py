"""Reference 5.5: the factory rules — what each one forbids, and what it leaves alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from penguin import protocol as om
from penguin.approval import FACTORY_RULES, CommandPolicy

POLICY = CommandPolicy()

FACTORY_NAMES = [
    "rm-recursive-force",
    "mkfs",
    "dd-to-block-device",
    "fork-bomb",
    "overwrite-block-device",
    "windows-recursive-delete",
    "windows-format-volume",
    "windows-disk-overwrite",
    "windows-fork-bomb",
]

FORBIDDEN: list[tuple[str, str]] = [
    # rm-recursive-force
    ("rm -rf /", "rm-recursive-force"),
    ("rm -fr ~", "rm-recursive-force"),
    ("rm -Rf /", "rm-recursive-force"),
    ("rm -rfv /", "rm-recursive-force"),
    ("rm -r -f /", "rm-recursive-force"),
    ("rm -f -R ~/", "rm-recursive-force"),
    ("rm --recursive --force /", "rm-recursive-force"),
    ("rm --force --recursive /*", "rm-recursive-force"),
    ("rm / -rf", "rm-recursive-force"),
    ("sudo rm -rf /*", "rm-recursive-force"),
    ("sudo -u root rm -rf /", "rm-recursive-force"),
    ("sudo -E rm -rf /", "rm-recursive-force"),
    ("doas rm -rf /", "rm-recursive-force"),
    ("env -i PATH=/bin rm -rf /", "rm-recursive-force"),
    ("FOO=1 rm -rf ~", "rm-recursive-force"),
    ("nohup rm -rf / &", "rm-recursive-force"),
    ("nice -n 10 rm -rf /", "rm-recursive-force"),
    ("timeout 5 rm -rf /", "rm-recursive-force"),
    ("time rm -rf /", "rm-recursive-force"),
    ("/bin/rm -rf /", "rm-recursive-force"),
    ("/usr/bin/rm -rf /", "rm-recursive-force"),
    ("\\rm -rf /", "rm-recursive-force"),
    ("command rm -rf /", "rm-recursive-force"),
    ("busybox rm -rf /", "rm-recursive-force"),
    ("rm -rf --no-preserve-root /", "rm-recursive-force"),
    ("rm -rf --no-preserve-root", "rm-recursive-force"),
    ("rm -rf /.*", "rm-recursive-force"),
    ("rm -rf //", "rm-recursive-force"),
    ("rm -rf /usr", "rm-recursive-force"),
    ("rm -rf /etc/", "rm-recursive-force"),
    ("rm -rf /home/*", "rm-recursive-force"),
    ("rm -rf /Users", "rm-recursive-force"),
    ("rm -rf ~/*", "rm-recursive-force"),
    ("rm -rf ~root", "rm-recursive-force"),
    ("rm -rf $HOME", "rm-recursive-force"),
    ('rm -rf "$HOME"', "rm-recursive-force"),
    ("rm -rf ${HOME}/", "rm-recursive-force"),
    ("rm -rf build /", "rm-recursive-force"),
    ("cd /tmp && rm -rf /", "rm-recursive-force"),
    ("true; rm -rf /", "rm-recursive-force"),
    ("false || rm -rf ~", "rm-recursive-force"),
    ("(rm -rf /)", "rm-recursive-force"),
    ("echo $(rm -rf /)", "rm-recursive-force"),
    ("echo `rm -rf /`", "rm-recursive-force"),
    ("if true; then rm -rf /; fi", "rm-recursive-force"),
    ('bash -c "rm -rf /"', "rm-recursive-force"),
    ("sh -lc 'rm -rf ~'", "rm-recursive-force"),
    ("/bin/bash -x -c 'sudo rm -rf /'", "rm-recursive-force"),
    ('"rm" -rf /', "rm-recursive-force"),
    ("r'm' -rf '/'", "rm-recursive-force"),
    ("rm -rf \\/", "rm-recursive-force"),
    ("find . -exec rm -rf / \\;", "rm-recursive-force"),
    ("rm  -rf\t/\n", "rm-recursive-force"),
    # mkfs
    ("mkfs.ext4 /dev/sda1", "mkfs"),
    ("mkfs -t ext4 /dev/sdb", "mkfs"),
    ("sudo mkfs.vfat -F 32 /dev/mmcblk0p1", "mkfs"),
    ("mke2fs /dev/vdb", "mkfs"),
    ("/sbin/mkfs.xfs -f /dev/nvme0n1p3", "mkfs"),
    ("newfs_apfs /dev/disk3s1", "mkfs"),
    # dd-to-block-device
    ("dd if=/dev/zero of=/dev/sda", "dd-to-block-device"),
    ("dd if=/dev/urandom of=/dev/nvme0n1 bs=1M", "dd-to-block-device"),
    ("sudo dd if=image.iso of=/dev/sdb bs=4M status=progress", "dd-to-block-device"),
    ("dd of=/dev/mmcblk0 if=x.img", "dd-to-block-device"),
    ("dd if=x.img of=/dev/rdisk2 bs=1m", "dd-to-block-device"),
    ('dd if=/dev/zero of="/dev/xvda"', "dd-to-block-device"),
    ("dd if=/dev/zero of=/dev/mapper/vg-root", "dd-to-block-device"),
    ("dd if=/dev/zero of=/dev/disk/by-id/ata-SAMSUNG_123", "dd-to-block-device"),
    # fork-bomb
    (":(){ :|:& };:", "fork-bomb"),
    (":(){ :|: & };:", "fork-bomb"),
    (": ( ) { : | : & } ; :", "fork-bomb"),
    (":(){:|:&};:", "fork-bomb"),
    ("bomb(){ bomb|bomb& }; bomb", "fork-bomb"),
    ("function f { f | f & }; f", "fork-bomb"),
    ("function f() { f|f & }; f", "fork-bomb"),
    ("bash -c ':(){ :|:& };:'", "fork-bomb"),
    # overwrite-block-device
    ("> /dev/sda", "overwrite-block-device"),
    ("cat x > /dev/nvme0n1", "overwrite-block-device"),
    ("echo hi >/dev/sdb1", "overwrite-block-device"),
    ("cat image >> /dev/vda", "overwrite-block-device"),
    ("cat image >| /dev/hda", "overwrite-block-device"),
    ("head -c 1M /dev/zero > /dev/disk2", "overwrite-block-device"),
    ("echo x | sudo tee /dev/sda", "overwrite-block-device"),
    ("cp disk.img /dev/sdb", "overwrite-block-device"),
    ("shred -n 1 /dev/sda", "overwrite-block-device"),
    ("wipefs -a /dev/sdc", "overwrite-block-device"),
    ("blkdiscard /dev/nvme1n1", "overwrite-block-device"),
    # windows-recursive-delete
    ("rd /s /q C:\\", "windows-recursive-delete"),
    ("RD /S /Q C:\\", "windows-recursive-delete"),
    ("rd /s/q C:\\", "windows-recursive-delete"),
    ("rmdir /s /q D:", "windows-recursive-delete"),
    ('rd /s /q "C:\\"', "windows-recursive-delete"),
    ("rd /s \\", "windows-recursive-delete"),
    ("del /s /q C:\\*", "windows-recursive-delete"),
    ("del /f /s /q C:\\*.*", "windows-recursive-delete"),
    ("erase /s /q %USERPROFILE%", "windows-recursive-delete"),
    ("rd /s /q %SystemRoot%", "windows-recursive-delete"),
    ("rd /s /q C:\\Windows", "windows-recursive-delete"),
    ('rd /s /q "C:\\Program Files"', "windows-recursive-delete"),
    ("rd /s /q C:\\Users\\", "windows-recursive-delete"),
    ("cmd /c rd /s /q C:\\", "windows-recursive-delete"),
    ("Remove-Item -Recurse -Force C:\\", "windows-recursive-delete"),
    ("Remove-Item -Path C:\\ -Recurse", "windows-recursive-delete"),
    ("remove-item -r -fo C:\\*", "windows-recursive-delete"),
    ("ri -Recurse $env:USERPROFILE", "windows-recursive-delete"),
    ("rm -r -Force C:\\Windows", "windows-recursive-delete"),
    ("Remove-Item -Recurse:$true $env:SystemDrive\\", "windows-recursive-delete"),
    (
        'powershell -NoProfile -Command "Remove-Item -Recurse -Force C:\\"',
        "windows-recursive-delete",
    ),
    ("pwsh -c 'rm -r -fo C:/'", "windows-recursive-delete"),
    ("Remove-Item -Recurse -Force $HOME", "windows-recursive-delete"),
    ("Remove-Item ~\\* -Recurse", "windows-recursive-delete"),
    ("rm -r ~", "windows-recursive-delete"),
    # windows-format-volume
    ("format C:", "windows-format-volume"),
    ("format d: /q /y", "windows-format-volume"),
    ("FORMAT E: /FS:NTFS", "windows-format-volume"),
    ("cmd /c format C:", "windows-format-volume"),
    ("Format-Volume -DriveLetter D", "windows-format-volume"),
    # windows-disk-overwrite
    ("dd if=/dev/zero of=\\\\.\\PhysicalDrive0", "windows-disk-overwrite"),
    ("Set-Content -Path \\\\.\\PHYSICALDRIVE1 -Value 0", "windows-disk-overwrite"),
    ("[IO.File]::OpenWrite('\\\\.\\C:')", "windows-disk-overwrite"),
    ("Clear-Disk -Number 1 -RemoveData", "windows-disk-overwrite"),
    ("Get-Disk 1 | Clear-Disk -RemoveData", "windows-disk-overwrite"),
    ("echo clean | diskpart", "windows-disk-overwrite"),
    ("(echo select disk 1 & echo clean all) | diskpart", "windows-disk-overwrite"),
    # windows-fork-bomb
    ("%0|%0", "windows-fork-bomb"),
    ("echo %0 | %0", "windows-fork-bomb"),
    (":s & start %0 & goto s", "windows-fork-bomb"),
]

ALLOWED: list[str] = [
    # Relative and deep paths: the workspace is the agent's to manage.
    "rm -rf ./build",
    "rm -rf build dist node_modules",
    "rm -rf *",
    "rm -rf .venv",
    "rm -rf ../sibling/build",
    "rm -rf /tmp/penguin-test",
    "rm -rf /home/user/project/build",
    "rm -rf ~/.cache/pip",
    "rm -rf $HOME/.cache",
    "rm -rf /usr/local/lib/mything",
    # rm without both flags, or other commands.
    "rm file",
    "rm -f /etc/nothing-here.lock",
    "rm -r old/",
    "rm -r ~/old",
    "rm -i -r /",
    "rmdir /",
    "git rm -r --cached .",
    # Text that only mentions a command.
    'echo "rm -rf /"',
    "echo rm -rf /",
    "grep -n 'rm -rf /' notes.md",
    "printf '%s\\n' 'rm -rf ~'",
    'git commit -m "document rm -rf / protection"',
    "man rm",
    # Runtime-computed: never matched.
    "$(echo rm) -rf /",
    "CMD='rm -rf /'; $CMD",
    "rm -rf $TARGET",
    "rm -rf $(pwd)",
    # Disks read, images written, harmless devices.
    "dd if=/dev/sda of=disk.img bs=1M",
    "dd if=/dev/zero of=./swapfile bs=1M count=10",
    "dd if=/dev/zero of=/dev/null count=1",
    "mkfs.ext4 disk.img",
    "mkfs.ext4 ./image.raw",
    "cat /dev/sda > backup.img",
    "cp /dev/sda backup.img",
    "echo hi > /dev/null",
    "echo oops >&2 2> /dev/stderr",
    "echo hi > /dev/tty",
    "echo x > /dev/fd/1",
    "ls /dev/sda*",
    "lsblk /dev/sda",
    "tee out.log",
    # Functions that are not fork bombs.
    "f(){ echo hi; }; f",
    "g(){ f | g; }",
    # Windows: relative targets and everyday commands.
    "rd /s /q build",
    "rmdir /s /q .\\dist",
    "del /s /q *.tmp",
    "del /q C:\\temp\\x.txt",
    "Remove-Item -Recurse -Force .\\node_modules",
    "Remove-Item C:\\temp\\x.txt",
    "Remove-Item -Recurse ~\\Downloads\\tmp",
    "git log --format=%H",
    "clang-format -i src/main.c",
    "python -c 'print(\"{:>10}\".format(1))'",
    "echo %0",
    "start notepad.exe",
    "diskpart /?",
    "make clean",
    # Not evaluated at all.
    "",
    "   ",
]


def call(name: str, arguments: str | dict[str, object]) -> om.OmniMessage[om.ToolCallPayload]:
    return om.tool_call(name, arguments, "call_1")


def test_5_5_factory_rule_names_and_order() -> None:
    assert [rule.name for rule in FACTORY_RULES] == FACTORY_NAMES
    assert all(rule.enabled for rule in FACTORY_RULES)
    assert CommandPolicy().rules == FACTORY_RULES


@pytest.mark.parametrize(("command", "rule"), FORBIDDEN)
def test_5_5_factory_rules_forbid(command: str, rule: str) -> None:
    matched = POLICY.match_command(command)
    assert matched is not None, command
    assert matched.name == rule
    exec_call = call("exec_command", {"description": "d", "cmd": command})
    assert POLICY.match(exec_call) == matched
    input_call = call("input_command", {"description": "d", "process_id": "1", "chars": command})
    assert POLICY.match(input_call) == matched


@pytest.mark.parametrize("command", ALLOWED)
def test_5_5_factory_rules_allow(command: str) -> None:
    assert POLICY.match_command(command) is None
    assert POLICY.match(call("exec_command", {"description": "d", "cmd": command})) is None


@pytest.mark.parametrize(
    "command",
    [
        "echo 'x; rm -rf /'",  # reads as a command sequence once unquoted
        "echo ':(){ :|:& };:'",  # the fork-bomb shape is matched wherever it is
    ],
)
def test_5_5_quoted_commands_are_read_pessimistically(command: str) -> None:
    assert POLICY.match_command(command) is not None


def test_5_5_every_factory_rule_is_exercised() -> None:
    assert {rule for _, rule in FORBIDDEN} == set(FACTORY_NAMES)


ADVERSARIAL = [
    "sudo " + "-u " * 3000 + "x",
    "rm " + "-r " * 3000 + "x",
    "bash " + "-c " * 3000 + "x",
    "env " + "A=1 " * 3000 + "x",
    ";" * 5000 + "rm -rf",
    "rm -rf " + "a" * 20000,
    "f(){ " + "f|" * 2000,
    "x=" * 5000,
]
"""Inputs that make a backtracking pattern explode; their timing is in benchmarks/policy.py."""


def test_5_5_adversarial_long_commands_are_judged_correctly() -> None:
    assert [POLICY.match_command(text) for text in ADVERSARIAL] == [None] * len(ADVERSARIAL)


# ----------------------------------------------------------------- spelling variants

_SPACE = st.text(alphabet=" \t\n", min_size=1, max_size=3)


def _quote(word: st.DrawFn, token: str) -> str:
    how = word(st.sampled_from(["plain", "single", "double", "escape", "split"]))
    if how == "single":
        return f"'{token}'"
    if how == "double":
        return f'"{token}"'
    if how == "escape":
        return "".join(f"\\{char}" if char.isalpha() else char for char in token)
    if how == "split" and len(token) > 1:
        cut = word(st.integers(min_value=1, max_value=len(token) - 1))
        return f"{token[:cut]}''{token[cut:]}"
    return token


@st.composite
def respelled(draw: st.DrawFn, tokens: list[str]) -> str:
    words = [_quote(draw, token) for token in tokens]
    text = draw(st.text(alphabet=" \t\n", max_size=2))
    for index, word in enumerate(words):
        text += word if index == 0 else draw(_SPACE) + word
    return text + draw(st.text(alphabet=" \t\n", max_size=2))


@pytest.mark.parametrize(
    ("tokens", "rule"),
    [
        (["rm", "-rf", "/"], "rm-recursive-force"),
        (["sudo", "rm", "--recursive", "--force", "~"], "rm-recursive-force"),
        (["dd", "if=/dev/zero", "of=/dev/sda"], "dd-to-block-device"),
        (["mkfs.ext4", "/dev/sda1"], "mkfs"),
        (["cat", "x", ">", "/dev/nvme0n1"], "overwrite-block-device"),
    ],
)
@given(data=st.data())
def test_5_5_normalization_whitespace_and_quoting_variants_still_match(
    tokens: list[str], rule: str, data: st.DataObject
) -> None:
    command = data.draw(respelled(tokens))
    matched = POLICY.match_command(command)
    assert matched is not None, command
    assert matched.name == rule

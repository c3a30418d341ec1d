"""Reference 5.5: the factory rules — what each one forbids, and what it leaves alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from penguin import protocol as om
from penguin.approval import FACTORY_RULES, CommandPolicy, PolicyRule

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
    ("rm -r -Force C:\\Windows", "rm-recursive-force"),
    ("Remove-Item -Recurse:$true $env:SystemDrive\\", "windows-recursive-delete"),
    (
        'powershell -NoProfile -Command "Remove-Item -Recurse -Force C:\\"',
        "windows-recursive-delete",
    ),
    ("pwsh -c 'rm -r -fo C:/'", "rm-recursive-force"),
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
    # Commands that only mention another one.
    "man rm",
    # rm without both flags, or other commands.
    "rm file",
    "rm -f /etc/nothing-here.lock",
    "rm -r old/",
    "rm -r ~/old",
    "rm -i -r /",
    "rmdir /",
    "git rm -r --cached .",
    # Runtime-computed: never matched.
    "$(echo rm) -rf /",
    "CMD='rm -rf /'; $CMD",
    # Disks read, images written, harmless devices.
    "dd if=/dev/sda of=disk.img bs=1M",
    "dd if=/dev/zero of=./swapfile bs=1M count=10",
    "dd if=/dev/zero of=/dev/null count=1",
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
    "del /q C:\\temp\\x.txt",
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


ADVERSARIAL: dict[str, str | None] = {
    "sudo " + "-u " * 3000 + "x": None,
    "rm " + "-r " * 3000 + "x": None,
    "bash " + "-c " * 3000 + "x": None,
    "env " + "A=1 " * 3000 + "x": None,
    ";" * 5000 + "rm -rf": "rm-recursive-force",
    "rm -rf " + "a" * 20000: "rm-recursive-force",
    "f(){ " + "f|" * 2000: None,
    "x=" * 5000: None,
    "rm " * 5000 + "-r": None,
    "dd " * 5000 + "of=/dev/nul": None,
    "tee " * 5000 + "x": None,
    "format " * 5000 + "x": None,
    "rd " * 5000 + "/s": None,
    "(" * 10000 + "x": None,
    "a/" * 10000 + "rm": None,
}
"""Inputs that make a backtracking pattern explode; their timing is in benchmarks/policy.py."""


def test_5_5_adversarial_long_commands_are_judged_correctly() -> None:
    judged = {text: POLICY.match_command(text) for text in ADVERSARIAL}
    assert {text: rule and rule.name for text, rule in judged.items()} == ADVERSARIAL


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


# ------------------------------------------- issue 9.2: the breadth of the reference's rules

ISSUE_9_2_FORBIDDEN: list[tuple[str, str]] = [
    # rm-recursive-force: both flags in one segment, whatever the target.
    ("rm -rf /tmp/dir", "rm-recursive-force"),
    ("rm -rf build", "rm-recursive-force"),
    ("rm -fr build", "rm-recursive-force"),
    ("rm -r -f build", "rm-recursive-force"),
    ("rm -f build -r", "rm-recursive-force"),
    ("rm -Rf build", "rm-recursive-force"),
    ("rm -rF build", "rm-recursive-force"),
    ("rm -vrf build", "rm-recursive-force"),
    ("rm --recursive --force build", "rm-recursive-force"),
    ("rm -r --force build", "rm-recursive-force"),
    ("rm --recursive -f build", "rm-recursive-force"),
    ("rm -rf ./build", "rm-recursive-force"),
    ("rm -rf build dist node_modules", "rm-recursive-force"),
    ("rm -rf *", "rm-recursive-force"),
    ("rm -rf .venv", "rm-recursive-force"),
    ("rm -rf ../sibling/build", "rm-recursive-force"),
    ("rm -rf /home/user/project/build", "rm-recursive-force"),
    ("rm -rf ~/.cache/pip", "rm-recursive-force"),
    ("rm -rf $HOME/.cache", "rm-recursive-force"),
    ("rm -rf /usr/local/lib/mything", "rm-recursive-force"),
    ("rm -rf $TARGET", "rm-recursive-force"),
    ("rm -rf $(pwd)", "rm-recursive-force"),
    ("rm\t-r\n-f build", "rm-recursive-force"),
    # ... spelled with a path, behind sudo, quoted, inside sh -c '...'
    ("/bin/rm -rf build", "rm-recursive-force"),
    ("/usr/bin/rm -fr /tmp/x", "rm-recursive-force"),
    ("\\rm -rf build", "rm-recursive-force"),
    ("sudo rm -rf /var/tmp/x", "rm-recursive-force"),
    ("sudo -u deploy rm -rf releases/old", "rm-recursive-force"),
    ('rm -rf "build"', "rm-recursive-force"),
    ("rm '-rf' build", "rm-recursive-force"),
    ('"rm" -r -f build', "rm-recursive-force"),
    ('rm "-r" "-f" build', "rm-recursive-force"),
    ("sh -c 'rm -rf build'", "rm-recursive-force"),
    ('bash -lc "rm -rf /tmp/dir"', "rm-recursive-force"),
    ("zsh -c 'cd x && rm -rf y'", "rm-recursive-force"),
    # ... behind the wrappers penguin already read (env, xargs, timeout, nice, ...)
    ("env rm -rf build", "rm-recursive-force"),
    ("env -i PATH=/bin rm -rf build", "rm-recursive-force"),
    ("xargs rm -rf < dirs.txt", "rm-recursive-force"),
    ("find . -name __pycache__ | xargs rm -rf", "rm-recursive-force"),
    ("timeout 5 rm -rf build", "rm-recursive-force"),
    ("nice -n 10 rm -rf build", "rm-recursive-force"),
    ("nohup rm -rf build &", "rm-recursive-force"),
    ("find . -type d -exec rm -rf {} +", "rm-recursive-force"),
    ("cd repo && rm -rf build", "rm-recursive-force"),
    ("make; rm -rf out", "rm-recursive-force"),
    # ... and where it is only mentioned: the accepted price of the breadth.
    ('echo "rm -rf /"', "rm-recursive-force"),
    ("echo rm -rf /", "rm-recursive-force"),
    ("grep -n 'rm -rf /' notes.md", "rm-recursive-force"),
    ("printf '%s\\n' 'rm -rf ~'", "rm-recursive-force"),
    ('git commit -m "document rm -rf / protection"', "rm-recursive-force"),
    ("git rm -rf --cached build", "rm-recursive-force"),
    # mkfs: the command word itself, whatever it formats.
    ("mkfs", "mkfs"),
    ("mkfs /dev/sdb1", "mkfs"),
    ("mkfs.ext4", "mkfs"),
    ("mkfs.ext4 disk.img", "mkfs"),
    ("mkfs.ext4 ./image.raw", "mkfs"),
    ("/sbin/mkfs.ext4 /dev/sda1", "mkfs"),
    ("sudo /usr/sbin/mkfs.xfs image", "mkfs"),
    ("mke2fs disk.img", "mkfs"),
    ("newfs_hfs disk.img", "mkfs"),
    ("./mkfs.sh", "mkfs"),
    # dd-to-block-device
    ("dd if=/dev/zero of=/dev/sda; sync", "dd-to-block-device"),
    ('dd if=x.img of="/dev/sdb"', "dd-to-block-device"),
    ("dd if=x.img of=/dev/loop0", "dd-to-block-device"),
    ("dd if=x.img of=/dev/sda1 bs=4M && sync", "dd-to-block-device"),
    ("sudo dd bs=1M if=x.img of=/dev/mmcblk0", "dd-to-block-device"),
    ("dd if=x.iso of=/dev/disk4", "dd-to-block-device"),
    ("dd if=x.img of=/dev/md0", "dd-to-block-device"),
    # fork-bomb
    (": () { : | : & } ; :", "fork-bomb"),
    ("a:(){ :|:& };:", "fork-bomb"),
    # overwrite-block-device
    ("echo x > /dev/sda", "overwrite-block-device"),
    ("cat x >'/dev/sdb'", "overwrite-block-device"),
    ('printf x > "/dev/nvme0n1"', "overwrite-block-device"),
    ("cat x 2>/dev/sda", "overwrite-block-device"),
    ("cat image > /dev/loop1", "overwrite-block-device"),
    ("cat x >> /dev/md0", "overwrite-block-device"),
    ("echo x | tee /dev/sdb1 > /dev/null", "overwrite-block-device"),
    # windows-recursive-delete: -Recurse with -Force, or /s with /q, whatever the target.
    ("Remove-Item -Recurse -Force build", "windows-recursive-delete"),
    ("Remove-Item build -Force -Recurse", "windows-recursive-delete"),
    ("Remove-Item -rec -f .\\node_modules", "windows-recursive-delete"),
    ("Remove-Item -Recurse -Force .\\node_modules", "windows-recursive-delete"),
    ("remove-item -r -fo x", "windows-recursive-delete"),
    ("rd /s /q build", "windows-recursive-delete"),
    ("RD /S/Q build", "windows-recursive-delete"),
    ("rmdir /s /q .\\dist", "windows-recursive-delete"),
    ("del /s /q *.tmp", "windows-recursive-delete"),
    ("erase /q /s x", "windows-recursive-delete"),
    ('cmd /c "rd /s /q build"', "windows-recursive-delete"),
    # windows-format-volume
    ("format C: /q", "windows-format-volume"),
    ("FORMAT D:", "windows-format-volume"),
    ("format /q E:", "windows-format-volume"),
    ("format.com f:", "windows-format-volume"),
    ('format "g:"', "windows-format-volume"),
    ("Format-Volume -DriveLetter C", "windows-format-volume"),
    # windows-disk-overwrite
    ("dd if=x of=\\\\.\\PhysicalDrive0", "windows-disk-overwrite"),
    ("Get-Content x > \\\\.\\PhysicalDrive1", "windows-disk-overwrite"),
    ("Clear-Disk -Number 0 -RemoveData", "windows-disk-overwrite"),
    # windows-fork-bomb
    ("%0 | %0", "windows-fork-bomb"),
    ("start %0", "windows-fork-bomb"),
]

ISSUE_9_2_ALLOWED: list[str] = [
    # The misses the issue names.
    "rm -r build",
    "grep -rf p .",
    "dd if=/dev/zero of=/dev/null bs=1M count=1",
    "echo x 2>/dev/null",
    "pnpm format",
    "X=rm; $X -rf /",
    # rm without both flags, or the flags in another segment.
    "rm build",
    "rm -f x.lock",
    "rm -r -i build",
    "rm --red-flag x",
    "rm x; ls -rf",
    "rm -r x | grep -f y",
    "rm -r x && cp -f a b",
    "grep -r -f patterns.txt .",
    "$(echo rm) -rf /",
    "CMD='rm -rf /'; $CMD",
    # Reading disks, harmless devices.
    "dd if=/dev/sda of=disk.img",
    "echo x > /dev/null",
    "make 2>/dev/stderr",
    "cat /dev/sda > backup.img",
    "cp /dev/sda backup.img",
    "ls /dev/sda*",
    "lsblk /dev/sda",
    # format without a drive letter, and other words that contain format.
    "pnpm format:check",
    "npm run format && npm test",
    "make format",
    "git log --format=%H",
    "clang-format -i src/main.c",
    "git format-patch -1",
    # Windows deletes without both switches, of ordinary targets.
    "Remove-Item -Recurse .\\tmp",
    "Remove-Item -Force x.txt",
    "del /q x.txt",
    "rd /s build",
    "npm rm -r left-pad",
]


@pytest.mark.parametrize(("command", "rule"), ISSUE_9_2_FORBIDDEN)
def test_9_2_factory_rules_forbid_as_broadly_as_the_reference(command: str, rule: str) -> None:
    matched = POLICY.match_command(command)
    assert matched is not None, command
    assert matched.name == rule
    exec_call = call("exec_command", {"description": "d", "cmd": command})
    assert POLICY.match(exec_call) == matched


@pytest.mark.parametrize("command", ISSUE_9_2_ALLOWED)
def test_9_2_factory_rules_still_allow(command: str) -> None:
    matched = POLICY.match_command(command)
    assert matched is None, (command, matched and matched.name)


def test_9_2_every_factory_rule_has_a_9_2_case_and_a_description() -> None:
    assert {rule for _, rule in ISSUE_9_2_FORBIDDEN} == set(FACTORY_NAMES)
    assert all(rule.description for rule in FACTORY_RULES)


def test_9_2_a_policy_rule_may_carry_a_description() -> None:
    rule = PolicyRule("no-push", "git push", description="no pushing")
    assert (rule.name, rule.enabled, rule.description) == ("no-push", True, "no pushing")
    assert PolicyRule("no-push", "git push").description == ""

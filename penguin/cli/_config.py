"""``penguin config``: a project's models and command policy, and an agent's vault.

``penguin config model add|default|vision|list|remove`` edits the project's
models and ``penguin config policy list|enable|disable|add|remove|test`` its
command policy, both in ``.project_config.toml``; ``penguin config vault
set|list|remove`` edits the agent's ``agent_state/.vault.toml``; ``penguin config mcp
list|add|remove|test`` its MCP servers (``_config_mcp``). Every
subcommand takes ``--root``, ``--project-id`` and ``--agent-id`` to pick the
files (reference D4). A project file this command creates lists the factory policy
rules, so they can be read and edited where the policy lives.

This module only parses, calls :mod:`penguin.config` and prints: the files'
format, validation, comment-keeping rewrites and 0600 modes are the library's.
Secrets are never printed: ``model list`` shows how a key is provided, ``vault
list`` shows names only, and both ``--api-key -`` and ``vault set KEY`` without a
value read the secret from standard input (without echo on a terminal), so it
stays out of shell history. Exit status: 0 on success, 1 with a one-line
``penguin config: ...`` message for anything wrong with the input or the files,
2 for argparse's own usage errors; ``policy test`` also exits 1 (after printing
``forbidden by RULE``) for a command the policy forbids.
"""

from __future__ import annotations

import argparse
import getpass
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, Final, final

from penguin import config
from penguin._errors import PenguinError
from penguin.approval import FACTORY_RULES, CommandPolicy, PolicyPatternError, PolicyRule
from penguin.config import (
    DEFAULT_AGENT_ID,
    DEFAULT_PROJECT_ID,
    KNOWN_BASE_URLS,
    AgentPaths,
    ModelEntry,
    PolicyRuleConfig,
    ProjectConfig,
)

from . import _config_mcp

__all__ = ["configure"]

_PROG: Final = "penguin config"

Handler = Callable[[argparse.Namespace], int]


@final
class _UsageError(PenguinError, ValueError):
    """Input the command cannot act on; reported as one line, exit 1."""


def configure(parser: argparse.ArgumentParser) -> None:
    """Fill in the ``config`` subcommand's parser (``penguin config --help``)."""
    parser.description = _wrapped(
        "Edit a project's models and command policy (.project_config.toml), an "
        "agent's vault (agent_state/.vault.toml) and its MCP servers "
        "(agent_state/system_config.yaml). Comments and hand edits in the files are kept."
    )
    parser.epilog = (
        "examples:\n"
        "  penguin config model add --provider openai --model-id gpt-4o "
        "--api-key-env OPENAI_API_KEY --set-default\n"
        "  penguin config model list\n"
        "  penguin config policy test 'rm -rf build'\n"
        "  penguin config vault set GITHUB_TOKEN < token.txt\n"
        "  penguin config mcp add files --command npx --arg=-y "
        "--arg @modelcontextprotocol/server-filesystem --arg .\n"
        "\n"
        "Files live under $PENGUIN_HOME (default ~/.penguin/data), or --root DIR."
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.set_defaults(handler=_print_help(parser))
    sections = parser.add_subparsers(dest="config_section", metavar="SECTION")

    location = argparse.ArgumentParser(add_help=False)
    group = location.add_argument_group("where the files are")
    group.add_argument(
        "--root",
        metavar="DIR",
        default=None,
        help="data root (default: $PENGUIN_HOME, else ~/.penguin/data)",
    )
    group.add_argument(
        "--project-id",
        metavar="ID",
        default=DEFAULT_PROJECT_ID,
        help=f"project (default: {DEFAULT_PROJECT_ID})",
    )
    group.add_argument(
        "--agent-id",
        metavar="ID",
        default=DEFAULT_AGENT_ID,
        help=f"agent, for the vault (default: {DEFAULT_AGENT_ID})",
    )
    _register_model(sections, location)
    _register_policy(sections, location)
    _register_vault(sections, location)
    _config_mcp.register(sections, location, leaf=_leaf, help_of=_print_help)


def _print_help(parser: argparse.ArgumentParser) -> Handler:
    def handler(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 1

    return handler


def _guarded(action: Handler) -> Handler:
    def handler(args: argparse.Namespace) -> int:
        try:
            return action(args)
        except (ValueError, OSError) as error:  # ConfigError is a ValueError
            print(f"{_PROG}: {error}", file=sys.stderr)
            return 1

    return handler


def _leaf(
    group: Any,
    name: str,
    location: argparse.ArgumentParser,
    *,
    help: str,
    description: str,
    examples: Sequence[str],
    action: Handler,
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = group.add_parser(
        name,
        parents=[location],
        help=help,
        description=_wrapped(description),
        epilog="examples:\n" + "\n".join(f"  {line}" for line in examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=_guarded(action))
    return parser


def _wrapped(text: str) -> str:
    """A description filled to the terminal-friendly width (the raw formatter keeps it)."""
    return textwrap.fill(text, width=78)


def _paths(args: argparse.Namespace) -> AgentPaths:
    return AgentPaths(args.root, args.project_id, args.agent_id)


def _where(args: argparse.Namespace) -> str:
    """The location options to repeat in a suggested command (empty for the defaults)."""
    parts = []
    if args.root is not None:
        parts.append(f" --root {args.root}")
    if args.project_id != DEFAULT_PROJECT_ID:
        parts.append(f" --project-id {args.project_id}")
    return "".join(parts)


def _read_secret(what: str) -> str:
    """A secret from standard input: typed without echo on a terminal, else all of stdin."""
    if sys.stdin.isatty():
        value = getpass.getpass(f"{what[:1].upper()}{what[1:]}: ")
    else:
        value = sys.stdin.read()
        if value.endswith("\n"):
            value = value[:-1]
            if value.endswith("\r"):
                value = value[:-1]
    if not value:
        raise _UsageError(f"no {what} was given on standard input")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


# ------------------------------------------------------------------ model


def _register_model(sections: Any, location: argparse.ArgumentParser) -> None:
    parser: argparse.ArgumentParser = sections.add_parser(
        "model",
        help="add, choose, list and remove the project's models",
        description=_wrapped(
            "The models of a project, in its .project_config.toml. A model is named by "
            "its provider and model id together; the default model is used when a run "
            "names none, the vision model describes images for models that cannot see."
        ),
        epilog=(
            "examples:\n"
            "  penguin config model add --provider openai --model-id gpt-4o "
            "--api-key-env OPENAI_API_KEY --set-default\n"
            "  penguin config model add --provider local --model-id qwen3 "
            "--base-url http://localhost:8000/v1 --no-vision\n"
            "  penguin config model list"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=_print_help(parser))
    actions = parser.add_subparsers(dest="model_action", metavar="ACTION")

    known = ", ".join(sorted(KNOWN_BASE_URLS))
    add = _leaf(
        actions,
        "add",
        location,
        help="add a model, or update one with the same provider and model id",
        description=(
            "Add a model to the project. Adding a provider and model id that are already "
            "configured updates that entry: the options given replace its values, the "
            "others keep theirs."
        ),
        examples=(
            "penguin config model add --provider openai --model-id gpt-4o "
            "--api-key-env OPENAI_API_KEY --set-default",
            "penguin config model add --provider deepseek --model-id deepseek-chat "
            "--api-key - --no-vision < key.txt",
            "penguin config model add --provider vllm --model-id Qwen/Qwen3-32B "
            "--base-url http://localhost:8000/v1 --context-window 32768",
        ),
        action=_model_add,
    )
    add.add_argument("--provider", required=True, metavar="P", help="a name for the endpoint")
    add.add_argument(
        "--model-id", required=True, metavar="M", help="the model's id at the endpoint"
    )
    add.add_argument(
        "--base-url",
        metavar="URL",
        help=f"the API root, e.g. http://localhost:8000/v1 (optional for {known})",
    )
    keys = add.add_mutually_exclusive_group()
    keys.add_argument(
        "--api-key",
        metavar="KEY",
        help="the API key, stored in the file; '-' reads it from stdin (keeps it out of history)",
    )
    keys.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="read the API key from environment variable VAR when the model is used",
    )
    add.add_argument(
        "--vision",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="whether the model accepts images (default: yes)",
    )
    add.add_argument(
        "--context-window", type=_positive_int, metavar="N", help="context size in tokens"
    )
    add.add_argument("--set-default", action="store_true", help="make it the default model")

    default = _leaf(
        actions,
        "default",
        location,
        help="choose the default model",
        description="Make a configured model the one used when a run names none.",
        examples=("penguin config model default openai gpt-4o",),
        action=_model_default,
    )
    default.add_argument("provider", metavar="PROVIDER")
    default.add_argument("model_id", metavar="MODEL_ID")

    vision = _leaf(
        actions,
        "vision",
        location,
        help="choose (or --clear) the vision model",
        description=(
            "Choose the model that describes images (describe_image) for models that "
            "cannot see them. It must be configured with vision enabled."
        ),
        examples=(
            "penguin config model vision openai gpt-4o",
            "penguin config model vision --clear",
        ),
        action=_model_vision,
    )
    vision.add_argument("provider", metavar="PROVIDER", nargs="?")
    vision.add_argument("model_id", metavar="MODEL_ID", nargs="?")
    vision.add_argument("--clear", action="store_true", help="unset the vision model")

    _leaf(
        actions,
        "list",
        location,
        help="list the configured models (API keys are never shown)",
        description=(
            "List the project's models. The API KEY column says how the key is provided "
            "(set, from $VAR, missing), never the key."
        ),
        examples=("penguin config model list", "penguin config model list --project-id web"),
        action=_model_list,
    )

    remove = _leaf(
        actions,
        "remove",
        location,
        help="remove a model",
        description=(
            "Remove a model. If it was the default or the vision model, that choice is "
            "cleared too (and the command says so)."
        ),
        examples=("penguin config model remove local qwen3",),
        action=_model_remove,
    )
    remove.add_argument("provider", metavar="PROVIDER")
    remove.add_argument("model_id", metavar="MODEL_ID")


def _factory_rules() -> tuple[PolicyRuleConfig, ...]:
    """The factory policy rules, as a project file lists them."""
    return tuple(PolicyRuleConfig(r.name, r.pattern, r.description) for r in FACTORY_RULES)


def _save(paths: AgentPaths, project: ProjectConfig) -> None:
    config.save_project_config(paths.project_config, project, default_rules=_factory_rules())


def _model_add(args: argparse.Namespace) -> int:
    paths = _paths(args)
    # Asked before the file is held: a person typing does not hold up other edits.
    typed = _read_secret("API key") if args.api_key == "-" else None
    with config.editing(paths.project_config):
        return _model_add_held(args, paths, typed)


def _model_add_held(args: argparse.Namespace, paths: AgentPaths, typed: str | None) -> int:
    project = config.load_project_config(paths.project_config)
    existing = project.find_model(args.provider, args.model_id)

    base_url = args.base_url
    if base_url is None:
        base_url = existing.base_url if existing else KNOWN_BASE_URLS.get(args.provider)
    if base_url is None:
        known = ", ".join(sorted(KNOWN_BASE_URLS))
        raise _UsageError(
            f'give --base-url for provider "{args.provider}" (the API root, such as '
            f"http://localhost:8000/v1); it is optional only for {known}"
        )
    if args.api_key is not None:
        api_key = typed if typed is not None else args.api_key
        api_key_env = None
    elif args.api_key_env is not None:
        api_key, api_key_env = None, args.api_key_env
    else:
        api_key = existing.api_key if existing else None
        api_key_env = existing.api_key_env if existing else None
    if api_key is not None and not api_key.strip():
        raise _UsageError("the API key is empty")
    vision = args.vision
    if vision is None:
        vision = existing.vision if existing else True
    context_window = args.context_window
    if context_window is None and existing is not None:
        context_window = existing.context_window

    entry = ModelEntry(
        provider=args.provider,
        model_id=args.model_id,
        base_url=base_url,
        api_key=api_key,
        api_key_env=api_key_env,
        vision=vision,
        context_window=context_window,
    )
    updated = config.add_model(project, entry, set_default=args.set_default)
    _save(paths, updated)

    verb = "Updated" if existing else "Added"
    print(f"{verb} model {entry.key} in {paths.project_config}.")
    if args.set_default:
        print(f"{entry.key} is the default model.")
    elif updated.default_model is None and len(updated.models) > 1:
        print(
            "No default model is set; choose one with: "
            f"penguin config model default PROVIDER MODEL_ID{_where(args)}"
        )
    if project.vision_model == entry.key and updated.vision_model is None:
        print(f"{entry.key} was the vision model; with --no-vision it no longer is.")
    if api_key_env is not None and entry.resolved_api_key() is None:
        print(f"Note: ${api_key_env} is not set in this environment.", file=sys.stderr)
    return 0


def _model_default(args: argparse.Namespace) -> int:
    paths = _paths(args)
    with config.editing(paths.project_config):
        project = config.load_project_config(paths.project_config)
        updated = config.set_default_model(project, args.provider, args.model_id)
        _save(paths, updated)
    print(f"{updated.default_model} is the default model.")
    return 0


def _model_vision(args: argparse.Namespace) -> int:
    given = args.provider is not None
    if args.clear == given or (given and args.model_id is None):
        raise _UsageError("give PROVIDER MODEL_ID, or --clear to unset the vision model")
    paths = _paths(args)
    with config.editing(paths.project_config):
        project = config.load_project_config(paths.project_config)
        if args.clear:
            _save(paths, config.clear_vision_model(project))
        else:
            updated = config.set_vision_model(project, args.provider, args.model_id)
            _save(paths, updated)
    if args.clear:
        print("The vision model is unset; describe_image has no model to ask until one is set.")
        return 0
    print(f"{updated.vision_model} is the vision model.")
    return 0


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _model_list(args: argparse.Namespace) -> int:
    paths = _paths(args)
    project = config.load_project_config(paths.project_config)
    if not project.models:
        print(f"No models are configured in {paths.project_config}.")
        print(f"Add one with: {_add_hint(args)}")
        return 0
    references = (("default_model", project.default_model), ("vision_model", project.vision_model))
    rows = [["PROVIDER", "MODEL ID", "ROLE", "API KEY", "VISION", "CONTEXT", "BASE URL"]]
    for entry in project.models:
        roles = [name.removesuffix("_model") for name, ref in references if ref == entry.key]
        rows.append(
            [
                entry.provider,
                entry.model_id,
                ", ".join(roles) or "-",
                entry.api_key_status(),
                "yes" if entry.vision else "no",
                "-" if entry.context_window is None else str(entry.context_window),
                entry.base_url,
            ]
        )
    for line in _table(rows):
        print(line)
    for name, ref in references:
        if ref is not None and project.find_model(ref.provider, ref.model_id) is None:
            print(f"Note: {name} names {ref}, which is not configured.", file=sys.stderr)
    if project.default_model is None and len(project.models) > 1:
        print(
            "Note: no default model is set; choose one with: "
            f"penguin config model default PROVIDER MODEL_ID{_where(args)}",
            file=sys.stderr,
        )
    return 0


def _add_hint(args: argparse.Namespace) -> str:
    return (
        "penguin config model add --provider P --model-id M --base-url URL --api-key KEY "
        f"--set-default{_where(args)}"
    )


def _model_remove(args: argparse.Namespace) -> int:
    paths = _paths(args)
    with config.editing(paths.project_config):
        project = config.load_project_config(paths.project_config)
        updated, cleared = config.remove_model(project, args.provider, args.model_id)
        _save(paths, updated)
    key = f"{args.provider}/{args.model_id}"
    print(f"Removed model {key} from {paths.project_config}.")
    if "default_model" in cleared:
        print(
            f"{key} was the default model; no default is set now (choose one with: "
            f"penguin config model default PROVIDER MODEL_ID{_where(args)})."
        )
    if "vision_model" in cleared:
        print(f"{key} was the vision model; no vision model is set now.")
    return 0


# ------------------------------------------------------------------ policy


def _register_policy(sections: Any, location: argparse.ArgumentParser) -> None:
    parser: argparse.ArgumentParser = sections.add_parser(
        "policy",
        help="list, switch, add, remove and try the project's command policy rules",
        description=_wrapped(
            "The command policy of a project, in its .project_config.toml: exec_command "
            "and input_command calls whose command matches an enabled rule are forbidden "
            "before any approval, whatever the approval mode. A rule is a name, a Python "
            "regular expression searched in the command, a description and an enabled "
            "switch. A file that lists no rules gets the factory rules; editing them writes "
            "the factory rules into the file first."
        ),
        epilog=(
            "examples:\n"
            "  penguin config policy list\n"
            "  penguin config policy test 'sudo rm -rf /tmp/cache'\n"
            "  penguin config policy add no-force-push 'git push\\s.*(--force|-f)\\b'"
            " --description 'no force pushes'\n"
            "  penguin config policy disable mkfs"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=_print_help(parser))
    actions = parser.add_subparsers(dest="policy_action", metavar="ACTION")

    _leaf(
        actions,
        "list",
        location,
        help="list the rules, whether each is enabled, and what it forbids",
        description=(
            "List the command policy's rules in evaluation order (the first enabled rule "
            "that matches forbids the call). When the file lists none, the factory rules "
            "that apply are shown."
        ),
        examples=("penguin config policy list", "penguin config policy list --project-id web"),
        action=_policy_list,
    )
    for name, verb, action in (
        ("enable", "Apply", _policy_enable),
        ("disable", "Stop applying", _policy_disable),
    ):
        switch = _leaf(
            actions,
            name,
            location,
            help=f"{name} a rule",
            description=(
                f"{verb} the rule NAME; it stays in the file either way. A file that lists "
                "no rules gets the factory rules written into it first."
            ),
            examples=(f"penguin config policy {name} rm-recursive-force",),
            action=action,
        )
        switch.add_argument("name", metavar="NAME")

    add = _leaf(
        actions,
        "add",
        location,
        help="add a rule (refused when the pattern is not a valid regular expression)",
        description=(
            "Add a rule after the existing ones. PATTERN is a Python regular expression, "
            "searched (not fully matched) in the command as written and with its quotes "
            "and backslash escapes removed; start it with (?i) to ignore case. Quote it "
            "for your shell."
        ),
        examples=(
            "penguin config policy add no-force-push 'git push\\s.*(--force|-f)\\b'",
            "penguin config policy add no-drop-table '(?i)\\bdrop\\s+table\\b' "
            "--description 'no dropping tables'",
        ),
        action=_policy_add,
    )
    add.add_argument("name", metavar="NAME")
    add.add_argument("pattern", metavar="PATTERN")
    add.add_argument(
        "--description", metavar="D", default="", help="what the rule forbids, in words"
    )

    remove = _leaf(
        actions,
        "remove",
        location,
        help="remove a rule",
        description=(
            "Remove the rule NAME. A file that lists no rules gets the factory rules "
            "written into it first, so removing one factory rule keeps the others; "
            "removing the last rule leaves none (rules = [])."
        ),
        examples=("penguin config policy remove windows-fork-bomb",),
        action=_policy_remove,
    )
    remove.add_argument("name", metavar="NAME")

    test = _leaf(
        actions,
        "test",
        location,
        help="say whether the policy forbids COMMAND (exit 1) or allows it (exit 0)",
        description=(
            "Check COMMAND against the policy as a session would (exec_command's cmd): "
            "print 'forbidden by RULE' and exit 1, or 'allowed' and exit 0. Nothing runs."
        ),
        examples=(
            "penguin config policy test 'rm -rf build'",
            "penguin config policy test 'git push --force' && echo allowed",
        ),
        action=_policy_test,
    )
    test.add_argument("command", metavar="COMMAND")


def _policy_is_off(project: ProjectConfig) -> bool:
    table = project.command_policy
    return table is not None and table.get("enabled", True) is False


def _note_if_off(project: ProjectConfig) -> None:
    if _policy_is_off(project):
        print(
            "Note: the command policy is off (command_policy.enabled = false); "
            "no rule applies until it is turned on.",
            file=sys.stderr,
        )


def _policy_list(args: argparse.Namespace) -> int:
    paths = _paths(args)
    project = config.load_project_config(paths.project_config)
    state = "off (command_policy.enabled = false)" if _policy_is_off(project) else "on"
    print(f"The command policy of {paths.project_config} is {state}.")
    listed = project.policy_rules()
    if listed is None or project.command_policy is None:
        print(
            "The file lists no rules, so the factory rules apply; editing one writes "
            "them into the file first."
        )
        listed, applied = _factory_rules(), {rule.name for rule in FACTORY_RULES}
    else:
        # What a session would apply; the rules it skips are reported on stderr, as then.
        rules = CommandPolicy.from_config({"rules": project.command_policy["rules"]}).rules
        applied = {rule.name for rule in rules}
    if not listed:
        print(
            "It has no rules: nothing is forbidden. Add one with: "
            f"penguin config policy add NAME PATTERN{_where(args)}"
        )
        return 0
    rows = [["NAME", "ENABLED", "DESCRIPTION"]]
    for rule in listed:
        enabled = "no" if not rule.enabled else "yes" if rule.name in applied else "skipped"
        rows.append([rule.name, enabled, rule.description or "-"])
    for line in _table(rows):
        print(line)
    return 0


def _materialising(args: argparse.Namespace) -> tuple[AgentPaths, ProjectConfig, bool]:
    """The paths, the project as it is now, and whether an edit will write the factory rules."""
    paths = _paths(args)
    project = config.load_project_config(paths.project_config)
    return paths, project, project.policy_rules() is None


def _note_materialised(paths: AgentPaths) -> None:
    print(
        f"The file listed no rules: the factory rules were written into {paths.project_config} "
        "first, so they can be read and edited there."
    )


def _policy_switch(args: argparse.Namespace, enabled: bool) -> int:
    paths, project, materialising = _materialising(args)
    changed = config.set_policy_rule_enabled(
        paths.project_config, args.name, enabled, default_rules=_factory_rules()
    )
    if materialising:
        _note_materialised(paths)
    word = "enabled" if enabled else "disabled"
    if changed:
        print(f"{word.capitalize()} rule {args.name}.")
    else:
        print(f"Rule {args.name} is already {word}.")
    _note_if_off(project)
    return 0


def _policy_enable(args: argparse.Namespace) -> int:
    return _policy_switch(args, True)


def _policy_disable(args: argparse.Namespace) -> int:
    return _policy_switch(args, False)


def _policy_add(args: argparse.Namespace) -> int:
    try:
        PolicyRule(args.name, args.pattern)
    except PolicyPatternError as error:
        raise _UsageError(
            f"the pattern of rule {args.name!r} is not a valid Python regular expression "
            f"({error.reason}); nothing was changed"
        ) from None
    rule = PolicyRuleConfig(args.name, args.pattern, args.description)
    paths, project, materialising = _materialising(args)
    config.add_policy_rule(paths.project_config, rule, default_rules=_factory_rules())
    if materialising:
        _note_materialised(paths)
    print(f"Added rule {rule.name} to the command policy of {paths.project_config}.")
    _note_if_off(project)
    return 0


def _policy_remove(args: argparse.Namespace) -> int:
    paths, _, materialising = _materialising(args)
    config.remove_policy_rule(paths.project_config, args.name, default_rules=_factory_rules())
    if materialising:
        _note_materialised(paths)
    print(f"Removed rule {args.name} from the command policy.")
    if not config.load_project_config(paths.project_config).policy_rules():
        print("No rules are left: the command policy forbids nothing.")
    return 0


def _policy_test(args: argparse.Namespace) -> int:
    project = config.load_project_config(_paths(args).project_config)
    rule = CommandPolicy.from_config(project.command_policy).match_command(args.command)
    if rule is None:
        print("allowed")
        _note_if_off(project)
        return 0
    print(f"forbidden by {rule.name}")
    return 1


# ------------------------------------------------------------------ vault


def _register_vault(sections: Any, location: argparse.ArgumentParser) -> None:
    parser: argparse.ArgumentParser = sections.add_parser(
        "vault",
        help="set, list and remove the agent's secret environment variables",
        description=_wrapped(
            "The agent's vault (agent_state/.vault.toml, mode 0600): environment variables "
            "given to every command the agent runs, overriding the host's. Values are "
            "never printed."
        ),
        epilog=(
            "examples:\n"
            "  penguin config vault set GITHUB_TOKEN          # type the value (not echoed)\n"
            "  penguin config vault set NPM_TOKEN - < npm-token.txt\n"
            "  penguin config vault list --agent-id reviewer"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=_print_help(parser))
    actions = parser.add_subparsers(dest="vault_action", metavar="ACTION")

    set_ = _leaf(
        actions,
        "set",
        location,
        help="store a variable (the value is read from stdin when omitted or '-')",
        description=(
            "Store NAME in the vault, replacing an earlier value. Without VALUE (or with "
            "'-') the value is read from standard input — typed without echo on a "
            "terminal — so it stays out of shell history; one trailing newline is dropped."
        ),
        examples=(
            "penguin config vault set GITHUB_TOKEN",
            'printf %s "$TOKEN" | penguin config vault set GITHUB_TOKEN',
            "penguin config vault set LOG_LEVEL debug",
        ),
        action=_vault_set,
    )
    set_.add_argument("key", metavar="NAME", help="an environment variable name")
    set_.add_argument("value", metavar="VALUE", nargs="?", help="the value (default: stdin)")

    _leaf(
        actions,
        "list",
        location,
        help="list the names in the vault (never the values)",
        description="Print the names stored in the vault, one per line. Values are not shown.",
        examples=("penguin config vault list",),
        action=_vault_list,
    )

    remove = _leaf(
        actions,
        "remove",
        location,
        help="remove a variable",
        description="Remove NAME from the vault.",
        examples=("penguin config vault remove GITHUB_TOKEN",),
        action=_vault_remove,
    )
    remove.add_argument("key", metavar="NAME")


def _vault_set(args: argparse.Namespace) -> int:
    paths = _paths(args)
    key = config.validate_env_name(args.key)
    value = args.value
    if value is None or value == "-":
        value = _read_secret(f"value for {key}")
    config.set_vault(paths.vault, key, value)
    print(f"Set {key} in the vault of agent {paths.agent_id} ({paths.vault}).")
    return 0


def _vault_list(args: argparse.Namespace) -> int:
    paths = _paths(args)
    keys = config.list_vault_keys(paths.vault)
    if not keys:
        print(f"The vault of agent {paths.agent_id} is empty ({paths.vault}).", file=sys.stderr)
    for key in keys:
        print(key)
    return 0


def _vault_remove(args: argparse.Namespace) -> int:
    paths = _paths(args)
    key = config.validate_env_name(args.key)
    if not config.remove_vault(paths.vault, key):
        raise _UsageError(f"{key} is not in the vault of agent {paths.agent_id} ({paths.vault})")
    print(f"Removed {key} from the vault of agent {paths.agent_id}.")
    return 0

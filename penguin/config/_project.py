r"""A project's ``.project_config.toml`` as a session reads it: its models and command policy.

The file (mode 0600: it may hold API keys) looks like this::

    default_model = { provider = "openai", model_id = "gpt-4o" }
    vision_model = { provider = "openai", model_id = "gpt-4o" }   # optional

    [[models]]
    provider = "openai"                      # a name of your choice for the endpoint
    model_id = "gpt-4o"                      # the id the endpoint knows the model by
    base_url = "https://api.openai.com/v1"   # API root; optional for known providers
    api_key_env = "OPENAI_API_KEY"           # or: api_key = "sk-..." (not both)
    vision = true                            # accepts images (default true)
    context_window = 128000                  # tokens (optional)

    [command_policy]                         # read by penguin.approval.CommandPolicy
    enabled = true
    [[command_policy.rules]]                 # a new file lists the factory rules here
    name = "no-force-push"
    pattern = 'git push\s.*(--force|-f)\b'
    description = "no force pushes"
    enabled = true

A ``[[models]]`` entry is identified by its ``provider`` and ``model_id``
together; ``default_model`` and ``vision_model`` name one by that pair, as an
inline table. ``api_key_env`` names an environment variable that holds the key,
read when the model is used, so the key itself need not be in the file. An
entry with neither key sends no ``Authorization`` header (local servers).

Owns: the typed view (:class:`ModelEntry`, :class:`ModelKey`,
:class:`ProjectConfig`) and the keys a model entry has (:data:`MODEL_KEYS`), the
API roots of known providers (:data:`KNOWN_BASE_URLS`), strict loading
(:func:`load_project_config`: a broken file is a :class:`ConfigError` naming file,
line and field) and choosing the model a session uses (:func:`resolve_model`).

Does not own: the edits ``penguin config`` makes and writing the file
(``_project_edits``), the ``[command_policy]`` rules' stored form
(``_command_policy``), reading a private TOML file (``_toml``), what the command
policy means (``penguin.approval``, which this layer must not import: the table is
handed over as a plain dict), talking to the model (``penguin.llm``), or where the
file lives (:class:`~penguin.config.AgentPaths`). A ``default_model`` or
``vision_model`` naming no configured entry is loaded as it is, so ``penguin
config`` can repair it; :func:`resolve_model` reports it, and
:meth:`ProjectConfig.vision_entry` treats it as unset (reference 6.4). Blocking
functions; async callers use a worker thread.
"""

from __future__ import annotations

import difflib
import os
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, NoReturn, final

import attrs

from penguin._log import warn

from ._command_policy import PolicyRuleConfig, policy_rules_of
from ._errors import ConfigError, ConfigValueError
from ._toml import field_lines, line_of_field, read_private_toml
from ._vault import ENV_NAME_PATTERN

__all__ = [
    "KNOWN_BASE_URLS",
    "MODEL_KEYS",
    "ModelEntry",
    "ModelKey",
    "ProjectConfig",
    "load_project_config",
    "resolve_model",
    "unknown_model",
]

KNOWN_BASE_URLS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "deepseek": "https://api.deepseek.com/v1",
        "ollama": "http://localhost:11434/v1",
        "openai": "https://api.openai.com/v1",
        "openrouter": "https://openrouter.ai/api/v1",
    }
)
"""The API root used for an entry of these providers that gives no ``base_url``."""

_ADD_MODEL_HINT: Final = (
    "penguin config model add --provider P --model-id M --base-url URL --api-key KEY --set-default"
)
_CHOOSE_DEFAULT_HINT: Final = "penguin config model default PROVIDER MODEL_ID"

_TOP_KEYS: Final = ("default_model", "vision_model", "models", "command_policy", "sandbox")
MODEL_KEYS: Final = (
    "provider",
    "model_id",
    "base_url",
    "api_key",
    "api_key_env",
    "vision",
    "context_window",
)
"""The keys of a ``[[models]]`` entry, in the order penguin writes them."""

_REFERENCE_KEYS: Final = ("provider", "model_id")


def _kind(value: object) -> str:
    """The type of a TOML value, for messages that must not show the value itself."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__} value"


def _shown(value: object) -> str:
    """A value for a message: strings quoted, short; other values by their kind."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:57] + "...")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return _kind(value)


def _is_url(value: str) -> bool:
    parts = urllib.parse.urlsplit(value)
    return parts.scheme in {"http", "https"} and bool(parts.netloc)


@final
@attrs.frozen
class ModelKey:
    """The identity of a ``[[models]]`` entry: its provider and model id, together.

    ``str(key)`` is ``provider/model_id``.
    """

    provider: str
    model_id: str

    def __str__(self) -> str:
        return f"{self.provider}/{self.model_id}"


@final
@attrs.frozen(kw_only=True)
class ModelEntry:
    """One ``[[models]]`` entry: an OpenAI-compatible endpoint and a model served there.

    At most one of ``api_key`` (the key itself) and ``api_key_env`` (the name of
    an environment variable holding it) is set; neither means no key is sent.
    ``api_key`` never appears in ``repr``. Construction checks every field and
    raises :class:`ValueError`: non-blank ``provider`` and ``model_id``, an
    ``http(s)://`` ``base_url``, a valid variable name, a positive
    ``context_window``.
    """

    provider: str
    model_id: str
    base_url: str
    api_key: str | None = attrs.field(default=None, repr=False)
    api_key_env: str | None = None
    vision: bool = True
    context_window: int | None = None

    def __attrs_post_init__(self) -> None:
        for name in ("provider", "model_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigValueError(f"{name} must be a non-empty string")
        if not _is_url(self.base_url):
            raise ConfigValueError(
                f"base_url must be an http:// or https:// URL (the API root, such as "
                f"http://localhost:8000/v1), not {_shown(self.base_url)}"
            )
        if self.api_key is not None and self.api_key_env is not None:
            raise ConfigValueError("give either api_key or api_key_env, not both")
        if self.api_key_env is not None and ENV_NAME_PATTERN.fullmatch(self.api_key_env) is None:
            raise ConfigValueError(
                f"api_key_env must be an environment variable name, not {_shown(self.api_key_env)}"
            )
        if self.context_window is not None and (
            isinstance(self.context_window, bool) or self.context_window <= 0
        ):
            raise ConfigValueError("context_window must be a positive number of tokens")

    @property
    def key(self) -> ModelKey:
        """The ``(provider, model_id)`` pair that identifies this entry."""
        return ModelKey(self.provider, self.model_id)

    def resolved_api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The key to send: ``api_key``, else the value of ``$api_key_env``, else None.

        ``environ`` defaults to ``os.environ``. An unset or empty variable gives None.
        """
        if self.api_key is not None:
            return self.api_key
        if self.api_key_env is not None:
            value = (os.environ if environ is None else environ).get(self.api_key_env)
            return value or None
        return None

    def api_key_status(self, environ: Mapping[str, str] | None = None) -> str:
        """How the key is provided, never the key: ``set``, ``from $VAR``, ``from $VAR (unset)``, ``missing``."""  # noqa: E501
        if self.api_key is not None:
            return "set"
        if self.api_key_env is not None:
            known = self.resolved_api_key(environ) is not None
            return f"from ${self.api_key_env}" + ("" if known else " (unset)")
        return "missing"


@final
@attrs.frozen(kw_only=True)
class ProjectConfig:
    """A project's ``.project_config.toml``, validated; ``ProjectConfig(path=p)`` is empty.

    ``models`` keeps file order. ``default_model`` and ``vision_model`` are the
    references as written, possibly naming no entry (see :meth:`default_entry`,
    :meth:`vision_entry`). ``command_policy`` is the ``[command_policy]`` table
    as plain Python values, or None when absent: hand it to
    ``penguin.approval.CommandPolicy.from_config``.
    """

    path: Path = attrs.field(converter=Path)
    models: tuple[ModelEntry, ...] = ()
    default_model: ModelKey | None = None
    vision_model: ModelKey | None = None
    command_policy: dict[str, Any] | None = None
    sandbox: dict[str, Any] | None = None
    """The ``[sandbox]`` table as plain values (spec/sandbox.md X1.3), or None when absent."""

    def find_model(self, provider: str, model_id: str) -> ModelEntry | None:
        """The entry with this provider and model id, or None."""
        wanted = ModelKey(provider, model_id)
        return next((entry for entry in self.models if entry.key == wanted), None)

    def default_entry(self) -> ModelEntry | None:
        """The entry ``default_model`` names, or None when unset or naming no entry."""
        ref = self.default_model
        return None if ref is None else self.find_model(ref.provider, ref.model_id)

    def vision_entry(self) -> ModelEntry | None:
        """The entry ``vision_model`` names, or None when unset or naming no entry."""
        ref = self.vision_model
        return None if ref is None else self.find_model(ref.provider, ref.model_id)

    def policy_rules(self) -> tuple[PolicyRuleConfig, ...] | None:
        """The command policy's rules as written, or None when it lists none (the factory set).

        Disabled rules are included (``enabled=False``); malformed entries, which the
        policy skips, are not. ``()`` for ``rules = []``.
        """
        return policy_rules_of(self.command_policy)


# ------------------------------------------------------------------ loading


@final
@attrs.frozen
class _Reader:
    path: Path
    lines: dict[str, int]

    def fail(self, field: str, reason: str) -> NoReturn:
        raise ConfigError(reason, self.path, line_of_field(self.lines, field), field)

    def warn_unknown(self, field: str, table: dict[str, Any], allowed: tuple[str, ...]) -> None:
        for key in table:
            if key in allowed:
                continue
            close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.7)
            hint = f'; did you mean "{close[0]}"?' if close else ""
            place = f"{field}.{key}" if field else key
            error = ConfigError(
                f"unknown key (known keys: {', '.join(allowed)}){hint}; ignored",
                self.path,
                line_of_field(self.lines, place),
                place,
            )
            warn(str(error))

    def string(self, table: dict[str, Any], field: str, key: str, *, secret: bool = False) -> str:
        value = table[key]
        if not isinstance(value, str):
            shown = _kind(value) if secret else _shown(value)
            self.fail(f"{field}.{key}", f"expected a string, got {shown}")
        if not value.strip():
            self.fail(f"{field}.{key}", "must not be empty")
        return value

    def reference(self, data: dict[str, Any], key: str) -> ModelKey | None:
        value = data.get(key)
        if value is None:
            return None
        example = '{ provider = "openai", model_id = "gpt-4o" }'
        if not isinstance(value, dict):
            self.fail(key, f"expected a table such as {example}, got {_shown(value)}")
        for part in _REFERENCE_KEYS:
            if part not in value:
                self.fail(key, f'missing "{part}"; write it as {example}')
        for extra in value:
            if extra not in _REFERENCE_KEYS:
                self.fail(f"{key}.{extra}", "unknown key (allowed keys: provider, model_id)")
        return ModelKey(self.string(value, key, "provider"), self.string(value, key, "model_id"))

    def model(self, value: object, field: str) -> ModelEntry:
        if not isinstance(value, dict):
            self.fail(field, f"expected a table (a [[models]] entry), got {_shown(value)}")
        self.warn_unknown(field, value, MODEL_KEYS)
        for key in ("provider", "model_id"):
            if key not in value:
                self.fail(field, f'missing "{key}"; every model entry needs provider and model_id')
        provider = self.string(value, field, "provider")
        model_id = self.string(value, field, "model_id")

        if "base_url" in value:
            base_url = self.string(value, field, "base_url")
            if not _is_url(base_url):
                self.fail(
                    f"{field}.base_url",
                    f"expected an http:// or https:// URL such as http://localhost:8000/v1, "
                    f"got {_shown(base_url)}",
                )
        elif provider in KNOWN_BASE_URLS:
            base_url = KNOWN_BASE_URLS[provider]
        else:
            self.fail(
                f"{field}.base_url",
                f'missing; give the API root of provider "{provider}", '
                'e.g. base_url = "http://localhost:8000/v1"',
            )

        api_key = self.string(value, field, "api_key", secret=True) if "api_key" in value else None
        api_key_env = None
        if "api_key_env" in value:
            if api_key is not None:
                self.fail(f"{field}.api_key_env", "give either api_key or api_key_env, not both")
            api_key_env = self.string(value, field, "api_key_env")
            if ENV_NAME_PATTERN.fullmatch(api_key_env) is None:
                self.fail(
                    f"{field}.api_key_env",
                    f"expected an environment variable name such as OPENAI_API_KEY, "
                    f"got {_shown(api_key_env)}",
                )

        vision = value.get("vision", True)
        if not isinstance(vision, bool):
            self.fail(f"{field}.vision", f"expected true or false, got {_shown(vision)}")
        context_window = value.get("context_window")
        if context_window is not None and (
            isinstance(context_window, bool)
            or not isinstance(context_window, int)
            or context_window <= 0
        ):
            self.fail(
                f"{field}.context_window",
                f"expected a positive integer (tokens), got {_shown(context_window)}",
            )
        return ModelEntry(
            provider=provider,
            model_id=model_id,
            base_url=base_url,
            api_key=api_key,
            api_key_env=api_key_env,
            vision=vision,
            context_window=context_window,
        )

    def models(self, data: dict[str, Any]) -> tuple[ModelEntry, ...]:
        value = data.get("models")
        if value is None:
            return ()
        if not isinstance(value, list):
            self.fail("models", f"expected [[models]] tables, got {_shown(value)}")
        entries: list[ModelEntry] = []
        first_seen: dict[ModelKey, str] = {}
        for index, item in enumerate(value):
            field = f"models[{index}]"
            entry = self.model(item, field)
            if entry.key in first_seen:
                self.fail(
                    field, f"duplicate model {entry.key} (first defined at {first_seen[entry.key]})"
                )
            first_seen[entry.key] = field
            entries.append(entry)
        return tuple(entries)


def load_project_config(path: str | os.PathLike[str]) -> ProjectConfig:
    """Read and validate ``.project_config.toml``; a missing file is an empty configuration.

    Raises :class:`ConfigError` naming the file, the line (when it can be found)
    and the field for broken TOML, a wrong type, a missing ``provider``,
    ``model_id`` or (for an unknown provider) ``base_url``, both ``api_key`` and
    ``api_key_env``, or two entries with the same provider and model id. API
    keys are never quoted in messages. Unknown keys are kept, with a warning on
    the ``penguin`` logger. A file readable by others is made private (0600).
    """
    file = Path(path)
    document = read_private_toml(file)
    if document is None:
        return ProjectConfig(path=file)
    reader = _Reader(file, field_lines(document.as_string()))
    data = document.unwrap()
    reader.warn_unknown("", data, _TOP_KEYS)
    policy = data.get("command_policy")
    if policy is not None and not isinstance(policy, dict):
        reader.fail("command_policy", f"expected a table ([command_policy]), got {_shown(policy)}")
    sandbox = data.get("sandbox")
    if sandbox is not None and not isinstance(sandbox, dict):
        reader.fail("sandbox", f"expected a table ([sandbox]), got {_shown(sandbox)}")
    return ProjectConfig(
        path=file,
        models=reader.models(data),
        default_model=reader.reference(data, "default_model"),
        vision_model=reader.reference(data, "vision_model"),
        command_policy=policy,
        sandbox=sandbox,
    )


# ------------------------------------------------------------------ resolution


def _listing(config: ProjectConfig) -> str:
    return ", ".join(str(entry.key) for entry in config.models) or "none"


def unknown_model(config: ProjectConfig, provider: str, model_id: str) -> str:
    """The reason for a pair that names no entry, listing the configured ones.

    ``no model local/qwen is configured (configured: openai/gpt-4o)``: the start of
    every message about such a pair, whichever edit or lookup met it.
    """
    return f"no model {provider}/{model_id} is configured (configured: {_listing(config)})"


def resolve_model(
    config: ProjectConfig, provider: str | None = None, model_id: str | None = None
) -> ModelEntry:
    """The entry a session uses: the one ``provider`` and ``model_id`` name, else the default.

    With no pair given: the ``default_model`` entry; when no default is set and
    exactly one model is configured, that one. Raises :class:`ValueError` when
    only one of ``provider``/``model_id`` is given, and :class:`ConfigError`
    (naming the file) whose message says what to run next when: no model is
    configured at all; the pair names no entry (the configured ones are listed);
    ``default_model`` names no entry; or several models exist and none is the
    default.
    """
    if (provider is None) != (model_id is None):
        raise ConfigValueError(
            "give provider and model_id together, or neither to use the default model"
        )
    if not config.models:
        raise ConfigError(f"No model is configured. Add one with: {_ADD_MODEL_HINT}", config.path)
    if provider is not None and model_id is not None:
        entry = config.find_model(provider, model_id)
        if entry is None:
            raise ConfigError(
                f"{unknown_model(config, provider, model_id)}. "
                f"Add it with: penguin config model add --provider {provider} "
                f"--model-id {model_id} --base-url URL --api-key KEY",
                config.path,
            )
        return entry
    if config.default_model is not None:
        entry = config.default_entry()
        if entry is None:
            raise ConfigError(
                f"default_model names {config.default_model}, which is not configured "
                f"(configured: {_listing(config)}). Choose one with: {_CHOOSE_DEFAULT_HINT}",
                config.path,
                field="default_model",
            )
        return entry
    if len(config.models) == 1:
        return config.models[0]
    raise ConfigError(
        f"no default model is set and {len(config.models)} models are configured "
        f"({_listing(config)}). Choose one with: {_CHOOSE_DEFAULT_HINT}",
        config.path,
    )

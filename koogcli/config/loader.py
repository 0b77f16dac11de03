"""Layered configuration: defaults < config file < environment < flags (SPEC §3).

Each layer is a partial nested dict; they are deep-merged and validated once into a frozen
Settings. A provenance map (dotted key -> where it came from) serves `config show` and
error messages, which name the file and line, the environment variable or the flag.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from koogcli.config.schema import PREPROCESSOR_TYPES, Settings
from koogcli.core.errors import ConfigError, KoogError

# An explicit table, not name-guessing: later entries win over earlier ones for one key.
ENV_KEYS: tuple[tuple[str, str], ...] = (
    ("OPENAI_BASE_URL", "llm.base_url"),
    ("KOOG_BASE_URL", "llm.base_url"),
    ("KOOG_MODEL", "llm.model"),
    ("KOOG_SYSTEM_PROMPT", "llm.system_prompt"),
    ("KOOG_TEMPERATURE", "llm.temperature"),
    ("KOOG_TIMEOUT_SECONDS", "llm.timeout_seconds"),
    ("KOOG_MAX_RETRIES", "llm.max_retries"),
    ("KOOG_SESSION", "chat.default_session"),
    ("KOOG_STREAM", "chat.stream"),
    ("KOOG_MARKDOWN", "chat.markdown"),
    ("KOOG_TERMINAL_REFLOWS", "chat.terminal_reflows"),
    ("KOOG_DATABASE_URL", "storage.url"),
    ("KOOG_DATABASE_SCHEMA", "storage.schema"),
)


@dataclass(frozen=True)
class LoadedConfig:
    settings: Settings
    path: Path
    file_exists: bool
    provenance: Mapping[str, str] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.path.parent


def load(
    path: Path,
    *,
    explicit: bool = False,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
) -> LoadedConfig:
    """Read, merge and validate every layer; raise ConfigError naming the culprit."""
    env = env if env is not None else {}
    raw_text, file_layer = _read_file(path, explicit)
    merged: dict[str, Any] = {}
    provenance: dict[str, str] = {}
    _merge(merged, file_layer, provenance, str(path))
    for var, key in ENV_KEYS:
        if env.get(var):
            _merge(merged, _nest(key, _env_value(key, env[var])), provenance, f"env {var}")
    for key, value in (flags or {}).items():
        if value is not None:
            _merge(merged, _nest(key, value), provenance, f"flag --{key.rsplit('.', 1)[-1]}")
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        raise _explain(exc, path, raw_text, provenance) from None
    except KoogError as exc:  # a validator raised a domain error (e.g. a session name)
        raise ConfigError(exc.message, exc.hint) from None
    if provenance.get("storage.url") == str(path):
        _refuse_stored_password(settings.storage.url, path, raw_text or "")
    return LoadedConfig(settings, path, raw_text is not None, provenance)


# Settings that are booleans: a config file must write true or false (a string is an
# error there), while an environment variable is text, read as these words.
_ENV_BOOLEANS = {"chat.stream", "chat.markdown"}
_WORDS = {"1": True, "true": True, "yes": True, "on": True}
_WORDS.update({"0": False, "false": False, "no": False, "off": False})


def _env_value(key: str, raw: str) -> object:
    if key in _ENV_BOOLEANS:
        return _WORDS.get(raw.strip().lower(), raw)
    return raw


def _refuse_stored_password(url: str, path: Path, text: str) -> None:
    """A database password never sits in a file koog reads or writes (issue 15)."""
    from urllib.parse import urlsplit

    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    if password:
        line = find_line(text, "storage.url")
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(
            f"{where}: storage.url holds a password; koog never keeps one in a file",
            hint="remove it and set PGPASSWORD, use ~/.pgpass, or put the whole URL in "
            "KOOG_DATABASE_URL",
        )


def validate_file(path: Path) -> Settings:
    return load(path, explicit=True).settings


MAX_CONFIG_BYTES = 1024 * 1024  # a config file is a page or two; more is not one


def _read_file(path: Path, explicit: bool) -> tuple[str | None, dict[str, Any]]:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"config file {path} is larger than {MAX_CONFIG_BYTES:,} bytes",
                hint="is it the right file? a koog config is a page or two of TOML",
            )
        text = data.decode("utf-8")
    except FileNotFoundError:
        if explicit:
            raise ConfigError(
                f"config file not found: {path}", hint="create it with `koog config init`"
            ) from None
        return None, {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path}: invalid TOML: {exc}", hint="fix the syntax at that line"
        ) from exc
    except RecursionError:
        raise ConfigError(
            f"{path}: invalid TOML: values nested too deeply",
            hint="a koog config nests tables and arrays a few levels at most",
        ) from None


def _nest(dotted: str, value: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    node = out
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def _merge(
    into: dict[str, Any],
    layer: Mapping[str, Any],
    prov: dict[str, str],
    source: str,
    prefix: str = "",
) -> None:
    for key, value in layer.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value, prov, source, dotted + ".")
            continue
        into[key] = value
        _mark(prov, dotted, value, source)


def _mark(prov: dict[str, str], dotted: str, value: object, source: str) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _mark(prov, f"{dotted}.{k}", v, source)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            _mark(prov, f"{dotted}.{i}", v, source)
    else:
        prov[dotted] = source


def _explain(
    exc: ValidationError, path: Path, text: str | None, prov: Mapping[str, str]
) -> ConfigError:
    err = exc.errors()[0]
    # Drop the discriminator tag pydantic inserts after a list index of preprocessors.
    loc = [str(p) for p in err["loc"] if str(p) not in PREPROCESSOR_TYPES]
    key = ".".join(loc)
    source = _source_of(key, prov)
    if source == str(path):
        line = find_line(text or "", key)
        where = f"{path}:{line}" if line else str(path)
    else:
        where = source
    if err["type"] == "extra_forbidden":
        hint = _suggest(loc)
        return ConfigError(f"{where}: unknown key {key!r}", hint=hint)
    given = err.get("input")
    shown = "" if isinstance(given, (dict, list)) else f" (got {given!r})"
    msg = str(err["msg"]).removeprefix("Value error, ")
    return ConfigError(
        f"{where}: {key}: {msg}{shown}",
        hint="`koog config init` writes a file that documents every key",
    )


def _source_of(key: str, prov: Mapping[str, str]) -> str:
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        for k, v in prov.items():
            if k == prefix or k.startswith(prefix + "."):
                return v
    return "defaults"


def _suggest(loc: list[str]) -> str | None:
    model: type[BaseModel] | None = Settings
    for part in loc[:-1]:
        if model is None or part.isdigit():
            continue
        info = model.model_fields.get(part)
        annotation = info.annotation if info else None
        model = (
            annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel)
            else None
        )
    if model is None:
        return "`koog config init` writes a file that documents every key"
    keys = [info.alias or name for name, info in model.model_fields.items()]
    close = difflib.get_close_matches(loc[-1], keys, n=1)
    return f"did you mean {close[0]!r}?" if close else f"valid keys: {', '.join(keys)}"


_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?")
_ASSIGN = re.compile(r"^\s*([A-Za-z0-9_.\-\"']+)\s*=")


def find_line(text: str, dotted: str) -> int | None:
    """Line number (1-based) where a dotted key is set or its table starts; best effort."""
    table = ""
    counters: dict[str, int] = {}
    best: tuple[int, int] | None = None  # (matched length, line)
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            name = header.group(2).replace('"', "").replace("'", "")
            if header.group(1) == "[[":
                counters[name] = counters.get(name, -1) + 1
                name = f"{name}.{counters[name]}"
            table = name
            path = table
        else:
            assign = _ASSIGN.match(line)
            if not assign:
                continue
            key = assign.group(1).replace('"', "").replace("'", "")
            path = f"{table}.{key}" if table else key
        if path == dotted:
            return number
        if dotted.startswith(path + ".") and (best is None or len(path) > best[0]):
            best = (len(path), number)
    return best[1] if best else None

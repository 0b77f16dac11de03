"""What `koog config` reports and writes. The API key itself is never part of it (§5.8)."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from koogcli.config.schema import TemplateSpec
from koogcli.core.errors import UsageError
from koogcli.services.compose import locate_config, write_private_file
from koogcli.services.context import AppContext


def config_file(flag: str | None, env: Mapping[str, str] | None) -> tuple[Path, bool]:
    return locate_config(flag, env)


def example_text() -> str:
    return resources.files("koogcli.config").joinpath("example.toml").read_text(encoding="utf-8")


def effective(ctx: AppContext) -> dict[str, Any]:
    """The settings turns use: a local server found, and its first model when none is
    configured, as `koog chat` would use them (with where they came from)."""
    from koogcli.core.urls import masked

    configured = ctx
    ctx, local = _in_effect(ctx)
    sources = dict(configured.config.provenance)
    if local is not None:
        if "llm.model" not in sources:
            sources["llm.model"] = f"the first model {local} lists"
        if ctx.settings.llm.base_url != configured.settings.llm.base_url:
            sources["llm.base_url"] = "a local server found on a known port"
    key_env = ctx.settings.llm.api_key_env
    settings = ctx.settings.model_dump(exclude_none=True, by_alias=True)
    settings["llm"]["base_url"] = masked(settings["llm"]["base_url"])
    settings["storage"]["url"] = masked(settings["storage"]["url"])
    return {
        "config_file": str(ctx.config.path),
        "config_file_exists": ctx.config.file_exists,
        "data_dir": str(ctx.data.root),
        "api_key": {"env": key_env, "set": bool(ctx.env.get(key_env))},
        "settings": settings,
        "sources": dict(sorted(sources.items())),
    }


def _in_effect(ctx: AppContext) -> tuple[AppContext, str | None]:
    """The context turns talk through, and the local server it found (None: none)."""
    from koogcli.core.errors import KoogError

    try:
        found, line = ctx.with_endpoint()
    except KoogError:  # no endpoint at all: show the configuration as it is
        return ctx, None
    if line is None:
        return ctx, None
    from koogcli.core.urls import masked

    url = found.settings.llm.base_url or ctx.env.get("OPENAI_BASE_URL", "")
    return found, masked(url) or "the local server"


def as_toml(info: Mapping[str, Any]) -> str:
    import tomli_w

    state = "" if info["config_file_exists"] else " (not present: defaults apply)"
    key = info["api_key"]
    lines = [
        f"# config file: {info['config_file']}{state}",
        f"# data dir:    {info['data_dir']}",
        f"# API key:     {'set' if key['set'] else 'not set'} in ${key['env']}",
    ]
    lines += [f"# {k} <- {v}" for k, v in info["sources"].items()]
    return "\n".join(lines) + "\n\n" + tomli_w.dumps(info["settings"])


def commented(example: str) -> str:
    """The example with every setting commented out: the file documents each key with its
    default, yet sets none, so `config show` still attributes them to the defaults."""
    import re

    return re.sub(r"^(?=[a-z_]+ = )", "# ", example, flags=re.MULTILINE)


def init(flag: str | None, env: Mapping[str, str] | None, force: bool) -> Path:
    path, _ = config_file(flag, env)
    if path.exists() and not force:
        raise UsageError(f"{path} already exists", hint="pass --force to overwrite it")
    write_private_file(path, commented(example_text()))
    return path


def validate(file: Path | None, flag: str | None, env: Mapping[str, str] | None) -> Path:
    from koogcli.config import loader

    path = file if file is not None else config_file(flag, env)[0]
    loader.validate_file(path)
    return path


def save_template(path: Path, name: str, spec: Mapping[str, Any], force: bool) -> None:
    """`koog chat --save NAME`: `[templates.NAME]` appended to the config file (its comments
    and other tables kept as written); one of that name is replaced only with `force`."""
    import re
    import tomllib

    import tomli_w

    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
        raise UsageError(f"template name {name!r} is not letters, digits, '-' or '_'")
    text = path.resolve().read_text(encoding="utf-8") if path.exists() else ""
    try:
        known = tomllib.loads(text).get("templates", {})
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"{path}: {err}", hint="fix the file before saving a template") from None
    if name in known:
        if not force:
            raise UsageError(
                f"template {name!r} exists already in {path}", hint="--force replaces it"
            )
        text = _without_table(text, name, path)
    try:
        table = tomli_w.dumps({"templates": {name: dict(spec)}})
    except TypeError as err:  # null has no TOML form
        raise UsageError(
            f"template {name!r} cannot be saved: {err}",
            hint="TOML has no null: leave out the option or the schema's null values",
        ) from None
    path = path.resolve()  # a linked config file is written where it lives
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private_file(path, text.rstrip("\n") + ("\n\n" if text.strip() else "") + table)


def _without_table(text: str, name: str, path: Path) -> str:
    """The file without `[templates.NAME]` and its subtables."""
    import re

    header = re.compile(r"^\s*\[\s*templates\s*\.\s*(?:\"?)" + re.escape(name) + r"(?:\"?)\s*[.\]]")
    out, inside, found = [], False, False
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("["):
            inside = bool(header.match(line))
            found = found or inside
        if not inside:
            out.append(line)
    if not found:
        raise UsageError(
            f"template {name!r} in {path} is not a [templates.{name}] table",
            hint="edit it by hand",
        )
    return "".join(out)


def templates(ctx: AppContext) -> dict[str, dict[str, Any]]:
    """`koog templates`: each saved prompt as its table says it."""
    return {
        name: spec.model_dump(by_alias=True, exclude_defaults=True)
        for name, spec in sorted(ctx.settings.templates.items())
    }


__all__ = [
    "TemplateSpec",  # the CLI's type for a template (cli/ does not import config/)
    "as_toml",
    "commented",
    "config_file",
    "effective",
    "example_text",
    "init",
    "save_template",
    "templates",
    "validate",
]

"""`koog chat`'s pipeline options (SPEC §2 "Pipelines"): `--schema`/`--schema-multi`,
`-x`/`--extract-last`, `-o KEY VALUE`, templates (`--save`, `-t`, `-p`): parsed here, turned
into the turn's CallOptions and what stdout shows."""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from koogcli.core import structured
from koogcli.core.errors import UsageError
from koogcli.ui import render

if TYPE_CHECKING:
    from koogcli.cli.options import Globals
    from koogcli.services.config_info import TemplateSpec
    from koogcli.services.context import AppContext
    from koogcli.services.turn.request import CallOptions


def pairs(given: list[str] | None, flag: str) -> list[tuple[str, str]]:
    """`-o KEY VALUE`s as cli/app.py joined them."""
    from koogcli.cli.app import PAIR_JOIN

    out = []
    for value in given or []:
        key, joined, rest = value.partition(PAIR_JOIN)
        if not joined:
            example = "temperature 0.3" if flag == "-o" else "name Ada"
            raise UsageError(f"{flag} needs a KEY and a VALUE", hint=f"{flag} {example}")
        out.append((key, rest))
    return out


@dataclass(frozen=True)
class Args:
    schema: str | None = None
    schema_multi: str | None = None
    extract: bool = False
    extract_last: bool = False
    options: list[tuple[str, str]] = field(default_factory=list)
    template: str | None = None
    params: list[tuple[str, str]] = field(default_factory=list)
    save: str | None = None
    force: bool = False

    def check(self) -> None:
        if self.schema is not None and self.schema_multi is not None:
            raise UsageError("give --schema or --schema-multi, not both")
        if self.extract and self.extract_last:
            raise UsageError("give -x/--extract or --extract-last, not both")
        if self.save is not None and self.template is not None:
            raise UsageError("--save makes a template and -t runs one; give one of them")
        if self.force and self.save is None:
            raise UsageError("--force goes with --save (it replaces a template of that name)")
        if self.params and self.template is None:
            raise UsageError("-p fills a template's $KEY; give the template with -t NAME")
        for given in (self.schema, self.schema_multi):
            if given is not None and not given.strip():
                raise UsageError("--schema is empty", hint="give fields: 'name, age int'")

    def check_with(self, as_json: bool, attached: bool, role: bool) -> None:
        """What this call's other flags would silently lose."""
        if (self.extract or self.extract_last) and as_json:
            raise UsageError("-x prints a code block and --json one object; give one of them")
        if self.save is not None and (as_json or attached or role):
            raise UsageError(
                "--save keeps the prompt, --system, -m, -o, --schema and -x; not -a, -r or --json",
                hint="attach files, or choose a role, when you run the template with -t",
            )

    @property
    def one_shot_only(self) -> bool:
        return bool(
            self.schema or self.schema_multi or self.extract or self.extract_last or self.template
        )


@dataclass(frozen=True)
class Output:
    """What stdout shows of the reply: the JSON document, a fenced block, or all of it."""

    schema: bool = False
    extract: str | None = None  # "first" | "last"

    @property
    def whole(self) -> bool:
        return not self.schema and self.extract is None

    def shown(self, reply: str) -> str:
        if self.schema:
            import json

            return json.dumps(structured.document(reply), ensure_ascii=False)
        block = structured.fenced_block(reply, last=self.extract == "last")
        return (block if block is not None else reply).rstrip("\n")


def schema(args: Args, spec: TemplateSpec | None) -> dict[str, Any] | None:
    """The schema asked for (a file, inline JSON or the concise syntax), else the
    template's; checked before anything is sent."""
    given = args.schema or args.schema_multi
    if given is None:
        return dict(spec.json_schema) if spec is not None and spec.json_schema else None
    path = Path(given).expanduser()
    if given.strip().endswith(".json") and "{" not in given and not path.exists():
        raise UsageError(f"no schema file {given}", hint="give a path, inline JSON or fields")
    if len(given) < 4096 and "\n" not in given and path.is_file():
        try:
            given = path.read_text(encoding="utf-8")
        except (OSError, UnicodeError) as err:
            raise UsageError(f"cannot read the schema file {path}: {err}") from None
    found = structured.parse(given)
    from koogcli.services import structured_output

    structured_output.check_schema(found)
    return structured.multi(found) if args.schema_multi is not None else found


def options(app_ctx: AppContext, args: Args, spec: TemplateSpec | None) -> dict[str, object]:
    """`[models."NAME"] options`, then the template's, then `-o KEY VALUE` (typed)."""
    model = app_ctx.settings.models.get(app_ctx.settings.llm.model)
    chosen: dict[str, object] = dict(model.options) if model is not None else {}
    if spec is not None:
        chosen.update(spec.options)
    for key, raw in args.options:
        name, value = structured.option(key, raw)
        chosen[name] = value
    return chosen


def call_options(
    app_ctx: AppContext, args: Args, spec: TemplateSpec | None, parts: tuple[dict[str, Any], ...]
) -> CallOptions:
    from koogcli.services.model_settings import llm_for
    from koogcli.services.turn.request import CallOptions

    settings = app_ctx.settings
    wire = llm_for(settings, settings.llm.model).wire_api
    if wire != "chat" and any(p.get("type") == "input_audio" for p in parts):
        raise UsageError(
            f"audio cannot go to this model: its protocol ({wire}) takes no audio input",
            hint="-m chooses a model served over chat completions that hears audio",
        )

    return CallOptions(options(app_ctx, args, spec), schema(args, spec), parts)


def output(args: Args, spec: TemplateSpec | None, has_schema: bool) -> Output:
    last = args.extract_last or (spec is not None and spec.extract_last and not args.extract)
    first = args.extract or (spec is not None and spec.extract and not last)
    return Output(has_schema, "last" if last else "first" if first else None)


def template(app_ctx: AppContext, name: str | None) -> TemplateSpec | None:
    if name is None:
        return None
    found = app_ctx.settings.templates.get(name)
    if found is None:
        known = ", ".join(sorted(app_ctx.settings.templates)) or "none are saved"
        raise UsageError(
            f"no template named {name!r} (templates: {known})",
            hint='`koog chat --save NAME "prompt"` saves one; `koog templates` lists them',
        )
    return found


def template_flags(spec: TemplateSpec, params: list[tuple[str, str]]) -> dict[str, object]:
    """The template's system prompt (its `$KEY`s filled) and model, as flags."""
    flags: dict[str, object] = {}
    if spec.system is not None:
        flags["llm.system_prompt"] = _filled(spec.system, dict(params), "system prompt")
    if spec.model is not None:
        flags["llm.model"] = spec.model
    return flags


def fill(
    spec: TemplateSpec, words: str, piped: str | None, params: list[tuple[str, str]]
) -> tuple[str, str | None]:
    """The template's prompt with `$KEY` filled by `-p` and `$input` by the command line's
    words and standard input; without `$input` in it, they follow the prompt."""
    given = dict(params)
    said = "\n\n".join(p for p in (words, (piped or "").strip("\n")) if p) or given.get("input", "")
    prompt = spec.prompt or ""
    if "input" in string.Template(prompt).get_identifiers():
        if not said.strip():
            raise UsageError(
                "the template's $input is empty", hint="give words, pipe text in, or -p input TEXT"
            )
        return _filled(prompt, {**given, "input": said}, "prompt"), None
    filled = _filled(prompt, given, "prompt")
    return "\n\n".join(p for p in (filled, words) if p), piped


def _placeholders(text: str, what: str) -> None:
    """A template's `$`s are placeholders or `$$`, checked when it is saved."""
    if not string.Template(text).is_valid():
        raise UsageError(
            f"the template's {what} has a $ that is no $KEY: {text!r}",
            hint="write $$ for a dollar sign (single quotes keep $KEY from the shell)",
        )


def _filled(text: str, values: dict[str, str], what: str) -> str:
    found = string.Template(text)
    missing = [k for k in found.get_identifiers() if k not in values]
    if missing:
        raise UsageError(
            f"the template's {what} needs {', '.join('$' + k for k in missing)}",
            hint=" ".join(f"-p {k} VALUE" for k in missing),
        )
    try:
        return found.substitute(values)
    except ValueError as err:  # a `$` that is no placeholder: `$$` writes one
        raise UsageError(f"the template's {what} has a stray $: {err}", hint="write $$") from None


def save(
    given: Globals,
    args: Args,
    prompt: str,
    system: str | None,
    model: str | None,
) -> None:
    """`--save NAME`: the invocation as `[templates.NAME]`; no model call."""
    from koogcli.services import config_info

    assert args.save is not None
    spec: dict[str, Any] = {}
    if prompt:
        spec["prompt"] = prompt
    if system is not None:
        spec["system"] = system
    if model is not None:
        spec["model"] = model
    typed = dict(structured.option(k, v) for k, v in args.options)
    if typed:
        spec["options"] = typed
    found = schema(args, None)
    if found is not None:
        spec["schema"] = found
    if args.extract or args.extract_last:
        spec["extract_last" if args.extract_last else "extract"] = True
    if not spec:
        raise UsageError("nothing to save: give a prompt, --system, -m, -o or --schema")
    for what in ("prompt", "system"):
        if what in spec:
            _placeholders(str(spec[what]), what)
    path, _ = config_info.config_file(given.config, given.env)
    config_info.save_template(path, args.save, spec, args.force)
    render.note(f"saved template {args.save} in {path}; `koog chat -t {args.save}` runs it")

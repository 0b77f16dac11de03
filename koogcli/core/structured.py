"""Structured output and extraction for pipelines (SPEC §2 "Pipelines"): a schema from a JSON
schema or llm's concise syntax (`name, age int, bio: a short bio`), a list of them
(`--schema-multi`), the JSON document a reply holds, and a reply's fenced code block."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from koogcli.core.errors import UsageError

# The forced tool a Messages upstream answers through, and the reply meta key of a schema.
ANSWER_TOOL = "structured_answer"
SCHEMA_KEY = "schema"
OPTIONS_KEY = "options"  # reply meta: the call's `-o KEY VALUE`s
_TYPES = {"int": "integer", "float": "number", "bool": "boolean", "str": "string"}
_FIELD = re.compile(r"^([A-Za-z_][\w-]*)(?:\s+(\w+))?\s*(?::\s*(.*))?$", re.S)
_FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n(.*?)^\1[ \t]*$", re.S | re.M)


def parse(given: str) -> dict[str, Any]:
    """A JSON schema given inline, or llm's concise syntax: fields separated by commas or
    new lines, each `name [int|float|bool|str][: description]` (str when no type)."""
    text = given.strip()
    if text.startswith("{"):
        try:
            schema = json.loads(text)
        except ValueError as err:
            raise UsageError(f"--schema is not valid JSON: {err}") from None
        if not isinstance(schema, dict):
            raise UsageError("--schema must be a JSON object (a JSON schema)")
        return schema
    separator = "\n" if "\n" in text else ","
    properties: dict[str, Any] = {}
    for raw in (part.strip() for part in text.split(separator)):
        if not raw:
            continue
        found = _FIELD.match(raw)
        kind = (found.group(2) or "str") if found else ""
        if found is None or kind not in _TYPES:
            raise UsageError(
                f"--schema field {raw!r} is not `name [int|float|bool|str][: description]`",
                hint='or give a JSON schema: \'{"type": "object", ...}\'',
            )
        spec: dict[str, Any] = {"type": _TYPES[kind]}
        if found.group(3):
            spec["description"] = found.group(3).strip()
        properties[found.group(1)] = spec
    if not properties:
        raise UsageError("--schema names no field")
    return {"type": "object", "properties": properties, "required": list(properties)}


def multi(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`--schema-multi`: a list of such objects, as `{"items": [...]}`."""
    return {
        "type": "object",
        "properties": {"items": {"type": "array", "items": dict(schema)}},
        "required": ["items"],
    }


def response_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAI's `response_format` asking for JSON that fits `schema`."""
    return {"type": "json_schema", "json_schema": {"name": "reply", "schema": dict(schema)}}


def schema_of(response_format: Mapping[str, Any]) -> dict[str, Any] | None:
    given = response_format.get("json_schema")
    schema = given.get("schema") if isinstance(given, Mapping) else None
    return dict(schema) if isinstance(schema, Mapping) else None


def document(reply: str) -> Any:
    """The JSON document a reply holds: the reply itself, or the one fenced block it holds
    (a model may wrap it in one, with words around); raises ValueError when there is none."""
    text = reply.strip()
    try:
        return json.loads(text)
    except ValueError as err:
        blocks = [m.group(2) for m in _FENCE.finditer(text)]
        if len(blocks) != 1:
            raise err from None
        return json.loads(blocks[0])


def fenced_block(reply: str, last: bool = False) -> str | None:
    """The contents of the reply's first (or last) fenced code block, without the fences."""
    blocks = [m.group(2) for m in _FENCE.finditer(reply)]
    if not blocks:
        return None
    return blocks[-1] if last else blocks[0]


# Request fields koog sets itself: `-o` cannot give them (the flags that do: -m, --schema).
OWN_FIELDS = frozenset({"model", "messages", "input", "stream", "tools", "response_format"})


def option_value(raw: str) -> object:
    """`-o KEY VALUE`: numbers, booleans, null and JSON objects or arrays typed; anything
    else the string as given. A number JSON cannot carry (NaN, 1e400) is refused."""
    import math

    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"-o value {raw!r} is not a number a request can carry")
    return value if not isinstance(value, str) else raw


def option(key: str, raw: str) -> tuple[str, object]:
    """One `-o KEY VALUE`, checked: koog's own fields refused, temperature a number."""
    key = key.strip()
    if not key:
        raise UsageError("-o needs a KEY and a VALUE (an empty key was given)")
    if key in OWN_FIELDS:
        raise UsageError(
            f"-o {key} is a field koog sets itself",
            hint="-m chooses the model, --schema the response format, --no-stream streaming",
        )
    value = option_value(raw)
    if key == "temperature" and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise UsageError(f"-o temperature must be a number, not {raw!r}")
    return key, value

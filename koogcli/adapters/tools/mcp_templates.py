"""The argument templates of `[[mcp.compensations]]`: a compensation's arguments written
over the call it undoes.

    entityNames = "{{ args.entities[*].name }}"     -> ["Ada", "Alan"]
    path = "{{ args.path }}"                         -> "/notes/a.txt"
    note = "undo of {{ args.path }}"                 -> "undo of /notes/a.txt"
    id = "{{ result.id }}"                           -> the id in the call's JSON result

A value that is one template keeps the type of what it selects; text around a template
makes a string (a selected list or object is written as JSON). Paths start at `args` (the
call's arguments) or `result` (its result, parsed as JSON when it is JSON, else the text),
then `.key`, `[N]` and `[*]` (every element; what follows applies to each).
"""

from __future__ import annotations

import json
import re
from typing import Any

_TEMPLATE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_STEP = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+|\*)\]|\[\"([^\"]*)\"\]")


class TemplateError(ValueError):
    """A template that does not fit the call: what it names is missing."""


def render(value: object, args: object, result: object) -> object:
    """`value` with every template filled in (dicts and lists walked)."""
    if isinstance(value, dict):
        return {k: render(v, args, result) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, args, result) for v in value]
    if not isinstance(value, str):
        return value
    whole = _TEMPLATE.fullmatch(value.strip())
    if whole is not None:
        return select(whole.group(1), args, result)

    def text(found: re.Match[str]) -> str:
        picked = select(found.group(1), args, result)
        return picked if isinstance(picked, str) else json.dumps(picked, ensure_ascii=False)

    return _TEMPLATE.sub(text, value)


def select(path: str, args: object, result: object) -> object:
    roots = {"args": args, "result": result}
    root = path.split(".", 1)[0].split("[", 1)[0]
    if root not in roots:
        raise TemplateError(f"{{{{ {path} }}}}: a path starts at `args` or `result`")
    rest = path[len(root) :]
    steps = []
    at = 0
    while at < len(rest):
        found = _STEP.match(rest, at)
        if found is None:
            raise TemplateError(f"{{{{ {path} }}}}: cannot read {rest[at:]!r}")
        key, index, quoted = found.group(1), found.group(2), found.group(3)
        steps.append(key if key is not None else quoted if quoted is not None else index)
        at = found.end()
    return _walk(roots[root], steps, path)


def _walk(value: object, steps: list[str], path: str) -> object:
    for i, step in enumerate(steps):
        if step == "*":
            if not isinstance(value, list):
                raise TemplateError(f"{{{{ {path} }}}}: [*] over something that is not a list")
            return [_walk(v, steps[i + 1 :], path) for v in value]
        if step.isdigit() and isinstance(value, list):
            index = int(step)
            if index >= len(value):
                raise TemplateError(f"{{{{ {path} }}}}: no element {index}")
            value = value[index]
        elif isinstance(value, dict) and step in value:
            value = value[step]
        else:
            raise TemplateError(f"{{{{ {path} }}}}: the call has no {step!r} there")
    return value


def parsed_result(text: str | None) -> Any:
    """A call's result for templates: its JSON when it is JSON, else its text."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # a server's text: nested too deep stays text
        return text

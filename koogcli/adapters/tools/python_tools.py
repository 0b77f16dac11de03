"""PythonToolBox: Python functions from `[[tools]]` offered to the model as tools.

The JSON schema comes from the function's signature, type hints and docstring, through a
pydantic model built from the signature; the same model validates the arguments the model
sends. Nothing a tool does can end a turn: a bad argument, an exception, `sys.exit()`,
`os._exit()`, a signal or running past its time limit becomes an error text sent back to
the model. Each call runs in a process of its own (adapters/tools/tool_worker.py): what it
prints never reaches stdout, its result is cut to `max_result_bytes`, and the time limit
stops it. A compensating `rollback` callable takes the same arguments.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from koogcli.adapters.tools import outliving, tool_worker
from koogcli.core.errors import ConfigError
from koogcli.core.tool_ports import ToolOutcome


@dataclass(frozen=True)
class Tool:
    name: str
    function: Callable[..., object]
    arguments: type[BaseModel]
    description: str
    rollback: Callable[..., object] | None = None
    ask: bool = False
    timeout: float = 60.0

    def spec(self) -> dict[str, object]:
        schema = _strip_titles(self.arguments.model_json_schema())
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }


def build_tool(
    spec: str,
    function: Callable[..., object],
    rollback: Callable[..., object] | None = None,
    *,
    ask: bool = False,
    timeout: float = 60.0,
) -> Tool:
    name = getattr(function, "__name__", "tool")
    doc = inspect.getdoc(function) or ""
    summary, params_doc = _parse_doc(doc)
    try:
        hints = get_type_hints(function)
        signature = inspect.signature(function)
    except (TypeError, ValueError, NameError) as exc:
        raise ConfigError(f"tool {spec!r}: cannot read its signature: {exc}") from exc
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, Field(default, description=params_doc.get(param.name)))
    model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    return Tool(name, function, model, summary or f"Call {name}.", rollback, ask, timeout)


def _parse_doc(doc: str) -> tuple[str, dict[str, str]]:
    """Summary paragraph, plus parameter notes from `Args:` or `:param x:` lines."""
    summary = doc.split("\n\n", 1)[0].strip()
    params: dict[str, str] = {}
    for match in re.finditer(r"^\s*:param\s+(\w+):\s*(.+)$", doc, re.MULTILINE):
        params[match.group(1)] = match.group(2).strip()
    section = re.search(
        r"^(?:Args|Arguments|Parameters):\s*\n((?:[ \t]+.+\n?)+)", doc, re.MULTILINE
    )
    if section:
        for match in re.finditer(
            r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.+)$", section.group(1), re.MULTILINE
        ):
            params.setdefault(match.group(1), match.group(2).strip())
    if section:
        summary = doc[: section.start()].strip().split("\n\n", 1)[0].strip()
    return summary, params


def _strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _render(result: object) -> str:
    if isinstance(result, str):
        return result
    if result is None:
        return "ok"
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)


class PythonToolBox:
    def __init__(self, tools: Sequence[Tool] = (), max_result_bytes: int = 1024 * 1024) -> None:
        self.tools = {t.name: t for t in tools}
        self.max_result_bytes = max_result_bytes

    def specs(self) -> list[dict[str, object]]:
        return [t.spec() for t in self.tools.values()]

    def names(self) -> list[str]:
        return list(self.tools)

    def asks(self, name: str, undo: bool = False) -> bool:
        tool = self.tools.get(name)
        return tool is not None and tool.ask

    def effects(self, name: str) -> dict[str, object] | None:
        return None

    def has_rollback(self, name: str) -> bool:
        tool = self.tools.get(name)
        return tool is not None and tool.rollback is not None

    def call(self, name: str, arguments: str, receipt: Path | None = None) -> ToolOutcome:
        tool = self.tools.get(name)
        if tool is None:
            return ToolOutcome(
                f"Error: no tool named {name!r}; available: {', '.join(self.tools)}",
                True,
                ran=False,
            )
        return self._invoke(tool, tool.function, arguments, receipt=receipt)

    def rollback(
        self,
        name: str,
        arguments: str,
        before: Callable[[], None] | None = None,
        receipt: Path | None = None,
        result: str | None = None,
    ) -> ToolOutcome:
        tool = self.tools.get(name)
        if tool is None or tool.rollback is None:
            return ToolOutcome(f"Error: no compensating tool registered for {name!r}", True)
        return self._invoke(tool, tool.rollback, arguments, before, receipt, outlive=True)

    def forget(self, receipt: Path) -> None:
        outliving.forget(receipt)

    def settle(self, name: str, receipt: Path) -> ToolOutcome | None:
        tool = self.tools.get(name)
        return outliving.settle(receipt, tool.timeout if tool is not None else 60.0)

    def _invoke(
        self,
        tool: Tool,
        function: Callable[..., object],
        arguments: str,
        before: Callable[[], None] | None = None,
        receipt: Path | None = None,
        outlive: bool = False,
    ) -> ToolOutcome:
        try:
            parsed = tool.arguments.model_validate_json(arguments or "{}")
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            return ToolOutcome(
                f"Error: invalid arguments for {tool.name}: {problems}", True, ran=False
            )
        kwargs = {k: getattr(parsed, k) for k in type(parsed).model_fields}
        if before is not None:
            before()  # as close to the call as possible (the compensation journal)
        return tool_worker.run(
            tool.name,
            function,
            kwargs,
            _render,
            tool.timeout,
            self.max_result_bytes,
            receipt,
            outlive,
        )

"""Codex's rollouts: `sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl` and
`archived_sessions/` under `$CODEX_HOME` or `~/.codex` (shared/AGENT_CLIENTS.md).

Lines are `{timestamp, type, payload}`. `session_meta` names the conversation, its folder
and version; `turn_context` its model; `response_item`s are the Responses API's items
(messages, reasoning with `encrypted_content`, function and custom tool calls and their
outputs by `call_id`). A `compacted` line's `replacement_history` repeats what came before
it, which is already read: it is passed over. User messages that are only what Codex
injected (`<environment_context>`, `<user_instructions>`) and developer messages are
context, not the conversation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from koogcli.adapters.stores.lines import objects, strict_text
from koogcli.core.archive import (
    Conversation,
    Skipped,
    imported,
    is_context,
    joined,
    message_id,
    utc,
)
from koogcli.core.messages import Message, ToolCall, utc_now

TOOL = "codex"
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def files(root: Path) -> Iterator[Path]:
    """Every rollout under `root` (a Codex home, one of its folders, or one file)."""
    if root.is_file():
        yield root
        return
    folders = [root / "sessions", root / "archived_sessions"]
    for folder in [f for f in folders if f.is_dir()] or [root]:
        yield from sorted(folder.rglob("rollout-*.jsonl"))


def read(path: Path, skipped: list[Skipped]) -> Conversation | None:
    # The rollout's uuid ends its name; session_meta says it again.
    found = Conversation(TOOL, "-".join(path.stem.split("-")[-5:]), str(path))
    out: list[Message] = []
    native: list[dict[str, Any]] = []
    for number, line in objects(path, skipped):
        payload, kind = line.get("payload"), line.get("type")
        if not isinstance(payload, dict):
            if "payload" in line:
                skipped.append(Skipped(f"{path}:{number}", "not an item Codex writes"))
            continue
        stamp = utc(line.get("timestamp"))
        if stamp:
            found.started_at = found.started_at or stamp
            found.updated_at = stamp
        try:
            if kind == "session_meta":
                _meta(found, payload)
            elif kind == "turn_context" and isinstance(payload.get("model"), str):
                found.model = payload["model"]
            elif kind == "response_item":
                _item(found, payload, number, stamp, out, native)
        except (TypeError, ValueError, KeyError, AttributeError):
            skipped.append(Skipped(f"{path}:{number}", "not an item Codex writes"))
    found.messages = out
    return found if out else None


def _meta(found: Conversation, payload: dict[str, Any]) -> None:
    if isinstance(payload.get("id"), str):
        found.source_id = payload["id"]
    if isinstance(payload.get("cwd"), str):
        found.cwd = payload["cwd"]
    if isinstance(payload.get("model"), str):
        found.model = payload["model"]


def _item(
    found: Conversation,
    item: dict[str, Any],
    number: int,
    stamp: str | None,
    out: list[Message],
    native: list[dict[str, Any]],
) -> None:
    kind = item.get("type")
    own = f"{kind}:{item.get('id') or item.get('call_id') or number}"
    new_id = message_id(TOOL, found.source_id, own)
    at = stamp or utc_now()
    if kind == "reasoning":
        native.append({k: item[k] for k in ("id", "summary", "encrypted_content") if k in item})
        return
    if kind == "message":
        role = item.get("role")
        text, parts = _content(item.get("content"))
        if role == "user" and text and not is_context(text):
            meta: dict[str, object] = {"parts": parts} if parts else {}
            out.append(imported(Message("user", text, id=new_id, meta=meta, created_at=at)))
        elif role == "assistant":
            _reply(out, native, new_id, text, (), at)
        return
    if kind in _CALLS:
        name = str(item.get("name") or ("local_shell" if kind == "local_shell_call" else "tool"))
        if kind == "function_call":
            arguments = str(item.get("arguments") or "{}")
        else:
            given = item.get("input") if kind == "custom_tool_call" else item.get("action")
            arguments = json.dumps({"input": given}, ensure_ascii=False)
        call = ToolCall(str(item.get("call_id") or item.get("id") or ""), name, arguments)
        _reply(out, native, new_id, "", (call,), at)
        return
    if kind in _OUTPUTS:
        text = _output(item.get("output"))
        call_id = str(item.get("call_id") or "")
        out.append(imported(Message("tool", text, id=new_id, tool_call_id=call_id, created_at=at)))


def _reply(
    out: list[Message],
    native: list[dict[str, Any]],
    new_id: str,
    text: str,
    calls: tuple[ToolCall, ...],
    at: str,
) -> None:
    """A reply's text or call; calls right after the reply's text (or each other) join it,
    as one Responses output holds them; the reasoning read before it is kept beside it."""
    last = out[-1] if out else None
    if calls and last is not None and last.role == "assistant":
        out[-1] = joined(last, "", calls, "reasoning", native)
    else:
        message = Message("assistant", text or None, id=new_id, tool_calls=calls, created_at=at)
        out.append(imported(message, {"reasoning": list(native)} if native else None))
    native.clear()


def _content(content: Any) -> tuple[str, list[dict[str, Any]]]:
    """The text of a message's parts, and its parts when any is an image."""
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    for part in content or []:
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            texts.append(strict_text(part.get("text")))
            parts.append({"type": "text", "text": texts[-1]})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
    return "\n".join(texts), parts if len(parts) > len(texts) else []


def _output(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        return str(output.get("content") or output.get("output") or "")
    if isinstance(output, list):
        return "\n".join(str(p.get("text") or "") for p in output if isinstance(p, dict))
    return ""

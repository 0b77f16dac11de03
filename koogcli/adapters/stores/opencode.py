"""opencode's store: `opencode.db` in its data dir (`$XDG_DATA_HOME/opencode`, SQLite:
`session`, `message`, `part`, each row's JSON in `data`), and the JSON files older versions
kept under `storage/session|message|part/` (shared/AGENT_CLIENTS.md).

A user message's text is its text parts (those opencode added itself are `synthetic`); an
assistant message's are its text parts and its tool parts, each a call with its result
(`state.input`, `state.output`); reasoning parts are kept beside the reply.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from koogcli.adapters.stores.lines import Bad, parse, read_only, text_of
from koogcli.core.archive import Conversation, Skipped, from_epoch, imported, message_id
from koogcli.core.messages import Message, ToolCall, utc_now

TOOL = "opencode"


def files(root: Path) -> Iterator[Path]:
    """The database, or the legacy storage folder, under `root` (its data dir, or a file)."""
    if root.is_file():
        yield root
        return
    if (root / "opencode.db").is_file():
        yield root / "opencode.db"
    if (root / "storage" / "session").is_dir():
        yield root / "storage"


def read(path: Path, skipped: list[Skipped]) -> Iterator[Conversation]:
    """Every conversation in the database (or legacy folder) at `path`."""
    if path.is_dir():
        yield from _legacy(path, skipped)
        return
    db = read_only(path, skipped)
    if db is None:
        return
    try:
        sessions = db.execute(
            "SELECT id, directory, title, model, time_created, time_updated FROM session "
            "ORDER BY time_created"
        ).fetchall()
        for sid, folder, _title, model, created, updated in sessions:
            rows = db.execute(
                "SELECT m.id, m.data, p.id, p.data FROM message m LEFT JOIN part p "
                "ON p.message_id = m.id WHERE m.session_id = ? ORDER BY m.time_created, m.id, p.id",
                [sid],
            ).fetchall()
            messages: dict[str, tuple[Any, list[Any]]] = {}
            for mid, mdata, pid, pdata in rows:
                entry = messages.setdefault(
                    mid, (_json(mdata, f"{path}: message {mid}", skipped), [])
                )
                if pid is not None:
                    entry[1].append(_json(pdata, f"{path}: part {pid}", skipped))
            found = Conversation(TOOL, str(sid), str(path), cwd=folder)
            found.model = _model(model)
            found.started_at, found.updated_at = _millis(created), _millis(updated)
            found.messages = _messages(found, messages, skipped)
            if found.messages:
                yield found
    except sqlite3.Error as exc:
        skipped.append(Skipped(str(path), f"cannot read: {exc}"))
    finally:
        db.close()


def _legacy(storage: Path, skipped: list[Skipped]) -> Iterator[Conversation]:
    for info_file in sorted((storage / "session").rglob("*.json")):
        info = _json(info_file.read_bytes(), str(info_file), skipped)
        if not isinstance(info, dict) or not isinstance(info.get("id"), str):
            continue
        sid = info["id"]
        messages: dict[str, tuple[Any, list[Any]]] = {}
        for message_file in sorted((storage / "message" / sid).glob("*.json")):
            data = _json(message_file.read_bytes(), str(message_file), skipped)
            parts = [
                _json(p.read_bytes(), str(p), skipped)
                for p in sorted((storage / "part" / message_file.stem).glob("*.json"))
            ]
            messages[message_file.stem] = (data, parts)
        ordered = dict(sorted(messages.items(), key=lambda kv: _created(kv[1][0])))
        found = Conversation(TOOL, sid, str(storage), cwd=info.get("directory"))
        times: dict[str, Any] = info["time"] if isinstance(info.get("time"), dict) else {}
        found.started_at, found.updated_at = (
            _millis(times.get("created")),
            _millis(times.get("updated")),
        )
        found.messages = _messages(found, ordered, skipped)
        if found.messages:
            yield found


def _messages(
    found: Conversation, messages: dict[str, tuple[Any, list[Any]]], skipped: list[Skipped]
) -> list[Message]:
    out: list[Message] = []
    for mid, (data, parts) in messages.items():
        if not isinstance(data, dict):
            if data is not None:  # None: named where it was read
                skipped.append(
                    Skipped(f"{found.file}: message {mid}", "not a message opencode writes")
                )
            continue
        at = _millis(_created(data)) or utc_now()
        good = [p for p in parts if isinstance(p, dict)]
        bad = [p for p in parts if p is not None and not isinstance(p, dict)]
        bad += [
            p
            for p in good
            if p.get("type") in ("text", "reasoning") and text_of(p.get("text")) is None
        ]
        if bad:
            where = f"{found.file}: message {mid}"
            skipped.append(Skipped(where, f"{len(bad)} parts not as opencode writes them"))
        try:
            if data.get("role") == "user":
                texts = [
                    text_of(p.get("text")) or ""
                    for p in good
                    if p.get("type") == "text" and not p.get("synthetic")
                ]
                if texts:
                    new_id = message_id(TOOL, found.source_id, mid)
                    out.append(
                        imported(Message("user", "\n".join(texts), id=new_id, created_at=at))
                    )
            elif data.get("role") == "assistant":
                if isinstance(data.get("modelID"), str):
                    found.model = data["modelID"]
                out += _reply(found, mid, good, at)
        except (TypeError, ValueError, KeyError, AttributeError):
            skipped.append(Skipped(f"{found.file}: message {mid}", "not a message opencode writes"))
    return out


def _reply(found: Conversation, mid: str, parts: list[dict[str, Any]], at: str) -> list[Message]:
    texts = [text_of(p.get("text")) or "" for p in parts if p.get("type") == "text"]
    reasoning = [{"text": p.get("text")} for p in parts if p.get("type") == "reasoning"]
    tools = [p for p in parts if p.get("type") == "tool"]
    calls, results = [], []
    for part in tools:
        state: dict[str, Any] = part["state"] if isinstance(part.get("state"), dict) else {}
        call_id = str(part.get("callID") or part.get("id") or "")
        arguments = json.dumps(state.get("input") or {}, ensure_ascii=False)
        calls.append(ToolCall(call_id, str(part.get("tool") or "tool"), arguments))
        output = text_of(
            state.get("output") if state.get("status") == "completed" else state.get("error")
        )
        rid = message_id(TOOL, found.source_id, f"{mid}:{call_id}")
        results.append(
            imported(
                Message("tool", str(output or ""), id=rid, tool_call_id=call_id, created_at=at)
            )
        )
    if not texts and not calls:
        return []
    reply = Message(
        "assistant",
        "".join(texts) or None,
        id=message_id(TOOL, found.source_id, mid),
        tool_calls=tuple(calls),
        created_at=at,
    )
    return [imported(reply, {"reasoning": reasoning} if reasoning else None), *results]


def _json(raw: Any, where: str, skipped: list[Skipped]) -> Any:
    found = parse(raw.encode() if isinstance(raw, str) else bytes(raw or b""))
    if isinstance(found, Bad):
        skipped.append(Skipped(where, found.why))
        return None
    return found


def _model(raw: Any) -> str | None:
    found = parse(raw.encode()) if isinstance(raw, str) else None
    if isinstance(found, dict) and isinstance(found.get("id"), str):
        return str(found["id"])
    return None


def _created(data: Any) -> int:
    times = data.get("time") if isinstance(data, dict) else None
    created = times.get("created") if isinstance(times, dict) else None
    return created if isinstance(created, int) else 0


def _millis(value: Any) -> str | None:
    return from_epoch(value / 1000) if isinstance(value, int) else None

"""llm's `logs.db` (`$LLM_USER_PATH`, else its app dir; `llm logs path`): from 0.32
`threads` / `turns` / `messages` / `parts` (a thread's messages chained by `parent_hash`
from its `tip_message_hash`), before it `conversations` + `responses` (a prompt and its
response a row). Both generations may be in one file; a thread is read where both hold
one conversation."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from koogcli.adapters.stores.lines import read_only, text_of
from koogcli.core.archive import Conversation, Skipped, imported, message_id, utc
from koogcli.core.messages import Message, ToolCall, utc_now

TOOL = "llm"


def files(root: Path) -> Iterator[Path]:
    if root.is_file():
        yield root
    elif (root / "logs.db").is_file():
        yield root / "logs.db"


def read(path: Path, skipped: list[Skipped]) -> Iterator[Conversation]:
    db = read_only(path, skipped)
    if db is None:
        return
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        threads: set[str] = set()
        if {"threads", "messages", "parts"} <= tables:
            for found in _threads(db, path, skipped):
                threads.add(found.source_id)
                yield found
        if {"conversations", "responses"} <= tables:
            for found in _conversations(db, path):
                if found.source_id not in threads:
                    yield found
    except sqlite3.Error as exc:
        skipped.append(Skipped(str(path), f"cannot read: {exc}"))
    finally:
        db.close()


def _threads(db: sqlite3.Connection, path: Path, skipped: list[Skipped]) -> Iterator[Conversation]:
    parents = dict(db.execute("SELECT hash, parent_hash FROM messages").fetchall())
    roles = dict(db.execute("SELECT hash, role FROM messages").fetchall())
    parts: dict[str, list[tuple[str, str | None, str | None, str | None]]] = {}
    for message, kind, tool, text, payload in db.execute(
        "SELECT message_hash, type, tool_name, text, payload FROM parts "
        "ORDER BY message_hash, position"
    ):
        parts.setdefault(message, []).append((kind, tool, text, payload))
    for tid, tip, started in db.execute(
        "SELECT id, tip_message_hash, datetime_utc FROM threads ORDER BY datetime_utc"
    ).fetchall():
        chain, at, seen = [], tip, set()
        while at is not None and at in parents and at not in seen:
            seen.add(at)
            chain.append(at)
            at = parents[at]
        found = Conversation(TOOL, str(tid), str(path), started_at=utc(started))
        turns = db.execute(
            "SELECT model, datetime_utc FROM turns WHERE thread_id = ? ORDER BY datetime_utc",
            [tid],
        ).fetchall()
        if turns:
            found.model, found.updated_at = turns[-1][0], utc(turns[-1][1])
        try:
            for hash_ in reversed(chain):
                found.messages += _message(found, hash_, roles.get(hash_), parts.get(hash_, []))
        except (TypeError, ValueError, AttributeError):
            skipped.append(Skipped(f"{path}: thread {tid}", "not a thread llm writes"))
            continue
        if found.messages:
            yield found


def _message(
    found: Conversation,
    hash_: str,
    role: Any,
    parts: list[tuple[str, str | None, str | None, str | None]],
) -> list[Message]:
    new_id = message_id(TOOL, found.source_id, hash_)
    texts = [text_of(text) or "" for kind, _tool, text, _payload in parts if kind == "text"]
    calls, results = [], []
    for kind, tool, text, payload in parts:
        given = _load(text_of(payload))
        if kind == "tool_call":
            arguments = given.get("arguments", {}) if isinstance(given, dict) else {}
            call_id = (
                str(given.get("tool_call_id") or given.get("id") or "")
                if isinstance(given, dict)
                else ""
            )
            calls.append(
                ToolCall(call_id, str(tool or "tool"), json.dumps(arguments, ensure_ascii=False))
            )
        elif kind == "tool_result":
            call_id = str(given.get("tool_call_id") or "") if isinstance(given, dict) else ""
            output = text_of(text)
            if output is None and isinstance(given, dict):
                output = text_of(given.get("output"))
            rid = message_id(TOOL, found.source_id, f"{hash_}:{call_id}")
            results.append(imported(Message("tool", output or "", id=rid, tool_call_id=call_id)))
    if role in ("user", "assistant") and (texts or calls):
        return [
            *results,
            imported(Message(role, "".join(texts) or None, id=new_id, tool_calls=tuple(calls))),
        ]
    return results


def _conversations(db: sqlite3.Connection, path: Path) -> Iterator[Conversation]:
    rows = db.execute(
        "SELECT r.id, r.conversation_id, r.model, r.prompt, r.response, r.datetime_utc "
        "FROM responses r ORDER BY r.conversation_id, r.datetime_utc, r.id"
    ).fetchall()
    by_conversation: dict[str, list[Any]] = {}
    for row in rows:
        by_conversation.setdefault(str(row[1] or row[0]), []).append(row)
    for cid, responses in by_conversation.items():
        found = Conversation(TOOL, cid, str(path))
        for rid, _cid, model, prompt, response, stamp in responses:
            at = utc(stamp) or utc_now()
            found.model = model or found.model
            found.started_at = found.started_at or at
            found.updated_at = at
            prompt, response = text_of(prompt), text_of(response)
            if prompt:
                uid = message_id(TOOL, cid, f"{rid}:prompt")
                found.messages.append(imported(Message("user", str(prompt), id=uid, created_at=at)))
            if response:
                aid = message_id(TOOL, cid, f"{rid}:response")
                found.messages.append(
                    imported(Message("assistant", str(response), id=aid, created_at=at))
                )
        if found.messages:
            yield found


def _load(payload: str | None) -> Any:
    try:
        return json.loads(payload) if payload else None
    except ValueError:
        return None

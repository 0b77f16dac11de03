"""The two chat apps' data exports (`conversations.json`, alone or in the export's zip):

- ChatGPT: a list of conversations, each a `mapping` of nodes (`message`, `parent`,
  `children`); the visible branch ends at `current_node`, every other leaf is a branch the
  person left (an edited prompt, a regenerated reply).
- Claude.ai: a list of conversations, each with `chat_messages` (`sender` human /
  assistant, `text` or `content` blocks), in order.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from koogcli.adapters.stores.lines import Bad, parse
from koogcli.core.archive import (
    Branch,
    Conversation,
    Skipped,
    from_epoch,
    imported,
    message_id,
    utc,
)
from koogcli.core.messages import Message, utc_now

NAME = "conversations.json"


def files(root: Path) -> Iterator[Path]:
    if root.is_file():
        yield root
    elif (root / NAME).is_file():
        yield root / NAME


def _document(path: Path, skipped: list[Skipped]) -> list[Any]:
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                inner = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == NAME]
                if not inner:
                    skipped.append(Skipped(str(path), f"no {NAME} in the zip"))
                    return []
                raw = archive.read(inner[0])
        else:
            raw = path.read_bytes()
    except (OSError, zipfile.BadZipFile) as exc:
        skipped.append(Skipped(str(path), f"cannot read: {exc}"))
        return []
    found = parse(raw)
    if not isinstance(found, list):
        skipped.append(Skipped(str(path), found.why if isinstance(found, Bad) else "not a list"))
        return []
    return found


def chatgpt(path: Path, skipped: list[Skipped]) -> Iterator[Conversation]:
    for number, item in enumerate(_document(path, skipped), start=1):
        try:
            found = _chatgpt(path, item)
        except (TypeError, ValueError, KeyError, AttributeError):
            skipped.append(Skipped(f"{path}: conversation {number}", "not a ChatGPT conversation"))
            continue
        if found is not None:
            yield found


def _chatgpt(path: Path, item: dict[str, Any]) -> Conversation | None:
    cid = str(item.get("conversation_id") or item.get("id"))
    mapping: dict[str, Any] = item["mapping"]
    found = Conversation("chatgpt", cid, str(path))
    found.started_at, found.updated_at = (
        from_epoch(item.get("create_time")),
        from_epoch(item.get("update_time")),
    )
    found.model = item.get("default_model_slug")

    def path_to(leaf: str) -> list[str]:
        chain, at, seen = [], leaf, set()
        while at is not None and at in mapping and at not in seen:
            seen.add(at)
            chain.append(at)
            at = mapping[at].get("parent")
        return chain[::-1]

    def messages(chain: list[str]) -> list[Message]:
        return [m for node in chain if (m := _chatgpt_message(cid, mapping[node])) is not None]

    leaves = [n for n, node in mapping.items() if not node.get("children")]
    current = item.get("current_node") if item.get("current_node") in mapping else None
    visible = path_to(current or (leaves[-1] if leaves else next(iter(mapping))))
    found.messages = messages(visible)
    for leaf in leaves:
        if leaf in visible:
            continue
        chain = path_to(leaf)
        common = 0
        while common < min(len(chain), len(visible)) and chain[common] == visible[common]:
            common += 1
        own = messages(chain[common:])
        if own:
            found.branches.append(Branch(len(messages(visible[:common])), own, leaf))
    return found if found.messages else None


def _chatgpt_message(cid: str, node: dict[str, Any]) -> Message | None:
    message = node.get("message")
    if not isinstance(message, dict):
        return None
    role = (message.get("author") or {}).get("role")
    metadata = message.get("metadata") or {}
    if role not in ("user", "assistant") or metadata.get("is_visually_hidden_from_conversation"):
        return None
    content = message.get("content") or {}
    texts = [p for p in content.get("parts") or [] if isinstance(p, str)]
    if isinstance(content.get("text"), str):
        texts.append(content["text"])
    text = "\n".join(t for t in texts if t)
    if not text:
        return None
    at = from_epoch(message.get("create_time")) or utc_now()
    new_id = message_id("chatgpt", cid, str(node.get("id") or message.get("id")))
    return imported(Message(role, text, id=new_id, created_at=at))


def claude_ai(path: Path, skipped: list[Skipped]) -> Iterator[Conversation]:
    for number, item in enumerate(_document(path, skipped), start=1):
        try:
            found = _claude_ai(path, item)
        except (TypeError, ValueError, KeyError, AttributeError):
            skipped.append(
                Skipped(f"{path}: conversation {number}", "not a Claude.ai conversation")
            )
            continue
        if found is not None:
            yield found


def _claude_ai(path: Path, item: dict[str, Any]) -> Conversation | None:
    cid = str(item["uuid"])
    found = Conversation("claude-ai", cid, str(path), started_at=utc(item.get("created_at")))
    found.updated_at = utc(item.get("updated_at"))
    for message in item.get("chat_messages") or []:
        role = {"human": "user", "assistant": "assistant"}.get(message.get("sender"))
        blocks = message.get("content") or []
        text = "\n".join(
            str(b.get("text") or "")
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "text"
        ) or str(message.get("text") or "")
        if role is None or not text:
            continue
        at = utc(message.get("created_at")) or utc_now()
        new_id = message_id("claude-ai", cid, str(message.get("uuid")))
        found.messages.append(imported(Message(role, text, id=new_id, created_at=at)))  # type: ignore[arg-type]
    return found if found.messages else None

"""Claude Code's transcripts: `projects/<folder>/<session-uuid>.jsonl` under
`$CLAUDE_CONFIG_DIR` or `~/.claude` (shared/AGENT_CLIENTS.md).

Each line is one JSON object; those with a `uuid` form a tree through `parentUuid` (after
a compaction, `logicalParentUuid` links the boundary to what it replaced). The visible
conversation is the path to the newest leaf; every other leaf is a branch the person left
(a rewind, an edited prompt). One API reply is written as several `assistant` lines (one
per content block) sharing `message.id`: they are one message again here. Tool results
are `user` lines of `tool_result` blocks. Subagents' lines (`isSidechain`) are their own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koogcli.adapters.stores.lines import objects, strict_text
from koogcli.core.archive import (
    Branch,
    Conversation,
    Skipped,
    imported,
    joined,
    message_id,
    session_name,
    utc,
)
from koogcli.core.messages import Message, ToolCall, utc_now

TOOL = "claude-code"


def files(root: Path) -> Iterator[Path]:
    """Every transcript under `root` (a config dir, its `projects`, or one file), each
    conversation's subagents' after it."""
    if root.is_file():
        yield root
        return
    projects = root / "projects" if (root / "projects").is_dir() else root
    for folder in sorted(p for p in projects.iterdir() if p.is_dir()) if projects.is_dir() else ():
        for transcript in sorted(folder.glob("*.jsonl")):
            yield transcript
            yield from sorted((folder / transcript.stem / "subagents").glob("agent-*.jsonl"))


@dataclass
class _Node:
    line: int
    parent: str | None
    messages: list[Message] = field(default_factory=list)


def read(path: Path, skipped: list[Skipped]) -> Conversation | None:
    """The conversation in one transcript; None when it holds no message. A subagent's
    (`<session>/subagents/agent-<id>.jsonl`, all sidechain lines) is a session of its own
    beside its conversation's: `claude-<session>~agent-<agent id>`."""
    agent = path.parent.name == "subagents"
    found = Conversation(TOOL, path.stem, str(path))
    if agent:
        session = path.parent.parent.name
        found.source_id = f"{session}:{path.stem.removeprefix('agent-')}"
        found.name = f"{session_name(TOOL, session)}~agent-{path.stem.removeprefix('agent-')[:10]}"
    nodes: dict[str, _Node] = {}
    replies: dict[str, tuple[str, Message]] = {}  # API message id -> (node uuid, merged)
    for number, line in objects(path, skipped):
        uuid = line.get("uuid")
        if not isinstance(uuid, str) or bool(line.get("isSidechain")) != agent:
            continue
        parent = line.get("parentUuid") or line.get("logicalParentUuid")
        node = nodes[uuid] = _Node(number, parent if isinstance(parent, str) else None)
        _note(found, line)
        try:
            _messages(found, uuid, line, node, nodes, replies)
        except (TypeError, ValueError, KeyError, AttributeError):
            skipped.append(Skipped(f"{path}:{number}", "not a message Claude Code writes"))
    if not nodes:
        return None
    found.messages, found.branches = _branches(nodes)
    return found if found.messages else None


def _note(found: Conversation, line: dict[str, Any]) -> None:
    stamp = utc(line.get("timestamp"))
    if stamp is not None:
        found.started_at = found.started_at or stamp
        found.updated_at = stamp
    if isinstance(line.get("cwd"), str):
        found.cwd = line["cwd"]
    if isinstance(line.get("sessionId"), str) and found.name is None:
        found.source_id = line["sessionId"]
    message = line.get("message")
    model = message.get("model") if isinstance(message, dict) else None
    if isinstance(model, str) and not model.startswith("<"):  # `<synthetic>`: none answered
        found.model = model


def _messages(
    found: Conversation,
    uuid: str,
    line: dict[str, Any],
    node: _Node,
    nodes: dict[str, _Node],
    replies: dict[str, tuple[str, Message]],
) -> None:
    kind, message = line.get("type"), line.get("message")
    if kind not in ("user", "assistant"):
        return
    if not isinstance(message, dict):
        raise TypeError("a message that is no object")
    stamp = utc(line.get("timestamp"))
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    new_id = message_id(TOOL, found.source_id, uuid)
    if kind == "user":
        node.messages = _user(blocks, new_id, stamp, uuid, found)
        return
    api_id = message.get("id")
    text, calls, native = _reply(blocks)
    earlier = replies.get(api_id) if isinstance(api_id, str) else None
    if earlier is not None and earlier[0] in nodes:
        # Another block of a reply already read: joined to it, this line adds nothing.
        owner, merged = earlier
        merged = joined(merged, text, calls, "thinking", native)
        nodes[owner].messages = [merged]
        replies[str(api_id)] = (owner, merged)
        return
    reply = imported(
        Message(
            "assistant",
            text or None,
            id=new_id,
            tool_calls=tuple(calls),
            created_at=stamp or utc_now(),
        ),
        {"thinking": native} if native else None,
    )
    node.messages = [reply]
    if isinstance(api_id, str):
        replies[api_id] = (uuid, reply)


def _user(
    blocks: list[Any], new_id: str, stamp: str | None, uuid: str, found: Conversation
) -> list[Message]:
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    results: list[Message] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(strict_text(block.get("text")))
            parts.append({"type": "text", "text": texts[-1]})
        elif kind == "image" and isinstance(block.get("source"), dict):
            source = block["source"]
            if source.get("type") == "base64":
                url = f"data:{source.get('media_type')};base64,{source.get('data')}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
        elif kind == "tool_result":
            call = str(block.get("tool_use_id") or "")
            rid = message_id(TOOL, found.source_id, f"{uuid}:{call}")
            results.append(
                imported(
                    Message(
                        "tool",
                        _text(block.get("content")),
                        id=rid,
                        tool_call_id=call,
                        created_at=stamp or utc_now(),
                    )
                )
            )
    out = list(results)
    if texts or len(parts) > len(texts):
        meta: dict[str, object] = {"parts": parts} if len(parts) > len(texts) else {}
        out.append(
            imported(
                Message(
                    "user", "\n".join(texts), id=new_id, meta=meta, created_at=stamp or utc_now()
                )
            )
        )
    return out


def _reply(blocks: list[Any]) -> tuple[str, list[ToolCall], list[dict[str, Any]]]:
    texts, calls, native = [], [], []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(strict_text(block.get("text")))
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            calls.append(ToolCall(str(block.get("id") or ""), str(block.get("name")), arguments))
        elif kind in ("thinking", "redacted_thinking"):
            native.append(block)
    return "".join(texts), calls, native


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text") or "") for b in content if isinstance(b, dict) and "text" in b
        )
    return ""


def _branches(nodes: dict[str, _Node]) -> tuple[list[Message], list[Branch]]:
    """The path to the newest leaf, and every other leaf's path as a branch."""
    parents = {n.parent for n in nodes.values() if n.parent}
    leaves = sorted((n.line, u) for u, n in nodes.items() if u not in parents)
    paths = [_path(nodes, u) for _line, u in leaves]
    visible = paths[-1]
    main = [m for u in visible for m in nodes[u].messages]
    branches = []
    for (_line, leaf), path in zip(leaves[:-1], paths[:-1], strict=True):
        common = 0
        while common < min(len(path), len(visible)) and path[common] == visible[common]:
            common += 1
        own = [m for u in path[common:] for m in nodes[u].messages]
        if own:
            shared = sum(len(nodes[u].messages) for u in path[:common])
            branches.append(Branch(shared, own, leaf))
    return main, branches


def _path(nodes: dict[str, _Node], leaf: str) -> list[str]:
    path, seen = [], set()
    at: str | None = leaf
    while at is not None and at in nodes and at not in seen:
        seen.add(at)
        path.append(at)
        at = nodes[at].parent
    return path[::-1]

"""Reading what earlier versions of koog kept in files, to move it into `koog.sqlite3` once.

- `checkpoints/NAME/objects.jsonl`: message versions, `{"s": seq, "h": digest, "m": {...}}`
  (and `{"next": N}` after a compaction).
- `checkpoints/NAME/checkpoints.jsonl`: checkpoint documents, one per line, their messages
  as runs `[first, last]` of object seqs; `{"format": "koog.checkpoint-deleted", "ids":
  [...]}` deletes earlier ones. Older still: one document per file, `SEQ-ID-TAG.json`.
- `checkpoints/NAME/compensations.jsonl`: the compensation journal, the last line for a
  (call id, rollback point) pair its status.
- `transcripts/NAME.jsonl`: the transcript, a message and its turn id per line.
- `memory-pending/NAME.json`: messages waiting for ingestion.
A line a crash cut short (or anything else that does not parse) is skipped, as those
readers skipped it. A checkpoint of an unknown format version is kept as such (listed,
never used). A checkpoint whose objects are gone or do not match their digest is left out
and named, never restored from.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from koogcli.adapters import atomic
from koogcli.adapters.codec.documents import parse_messages, parse_pending
from koogcli.adapters.sql.journal import parse_entry
from koogcli.core.checkpoints import CHECKPOINT_FORMAT_VERSION, Checkpoint, CompensationEntry
from koogcli.core.errors import KoogError
from koogcli.core.messages import Message

_LOOSE = re.compile(r"^(\d{8})-([0-9a-f]+)-([rmst])\.json$")
_MARKER = "00000000-0-m.json"


@dataclass
class Session:
    """Everything of one session the older layout held."""

    name: str
    checkpoints: list[Checkpoint] = field(default_factory=list)
    journal: list[CompensationEntry] = field(default_factory=list)
    transcript: list[tuple[Message, str]] = field(default_factory=list)
    pending: list[Message] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)  # removed once moved


def names(root: Path) -> list[str]:
    """Sessions the data dir holds in the older layout."""
    found: set[str] = set()
    for folder, suffix in (
        ("checkpoints", ""),
        ("transcripts", ".jsonl"),
        ("memory-pending", ".json"),
    ):
        place = root / folder
        if place.is_dir() and not place.is_symlink():
            for entry in place.iterdir():
                if suffix and entry.name.endswith(suffix):
                    found.add(entry.name[: -len(suffix)])
                elif not suffix and entry.is_dir():
                    found.add(entry.name)
    return sorted(found)


def read(root: Path, name: str) -> Session:
    session = Session(name)
    folder = root / "checkpoints" / name
    if folder.is_dir():
        session.paths.append(folder)
        objects = dict(_objects(folder / "objects.jsonl"))
        for cid, seq, doc in _documents(folder):
            found = _checkpoint(name, cid, seq, doc, objects)
            if isinstance(found, str):
                session.problems.append(found)
            else:
                session.checkpoints.append(found)
        latest: dict[tuple[str | None, str | None], CompensationEntry] = {}
        for raw in _lines(folder / "compensations.jsonl"):
            try:
                entry = parse_entry(raw)
            except (ValueError, KeyError, TypeError):
                continue
            latest[(entry.call.id, entry.rollback_point)] = entry
        session.journal = list(latest.values())
    transcript = root / "transcripts" / f"{name}.jsonl"
    if transcript.is_file():
        session.paths.append(transcript)
        for raw in _lines(transcript):
            try:
                [message] = parse_messages([raw], str(transcript))
            except (KoogError, ValueError):
                continue
            turn = raw.get("turn_id") if isinstance(raw, dict) else None
            session.transcript.append((message, str(turn or "")))
    pending = root / "memory-pending" / f"{name}.json"
    if pending.is_file():
        session.paths.append(pending)
        try:
            session.pending = parse_pending(json.loads(atomic.read_bytes(pending)), str(pending))
        except (KoogError, ValueError):
            session.problems.append(f"{pending} was not readable; its messages were not moved")
    return session


def _lines(path: Path) -> Iterator[object]:
    try:
        data = atomic.read_bytes(path)
    except FileNotFoundError:
        return
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        try:
            yield json.loads(line)
        except (ValueError, RecursionError):
            continue  # cut short by a crash, closed off later


def _objects(path: Path) -> Iterator[tuple[int, tuple[str, dict[str, object]]]]:
    for raw in _lines(path):
        if (
            isinstance(raw, dict)
            and isinstance(raw.get("s"), int)
            and isinstance(raw.get("m"), dict)
        ):
            yield raw["s"], (str(raw.get("h", "")), raw["m"])


def _documents(folder: Path) -> Iterator[tuple[str, int, dict[str, object]]]:
    """(id, seq, document) of every live checkpoint, packed first, then separate files."""
    packed: dict[str, dict[str, object]] = {}
    for raw in _lines(folder / "checkpoints.jsonl"):
        if not isinstance(raw, dict):
            continue
        if raw.get("format") == "koog.checkpoint-deleted" and isinstance(raw.get("ids"), list):
            for cid in raw["ids"]:
                packed.pop(str(cid), None)
        elif isinstance(raw.get("id"), str) and isinstance(raw.get("seq"), int):
            packed[raw["id"]] = raw
    for cid, doc in sorted(packed.items(), key=lambda item: int(item[1]["seq"])):  # type: ignore[call-overload]
        yield cid, int(doc["seq"]), doc  # type: ignore[call-overload]
    next_seq = max((int(d["seq"]) for d in packed.values()), default=-1) + 1  # type: ignore[call-overload]
    for path in sorted(folder.iterdir()):
        match = _LOOSE.match(path.name)
        if not match or path.name == _MARKER or match.group(2) in packed:
            continue
        try:
            raw = json.loads(atomic.read_bytes(path))
        except (KoogError, OSError, ValueError, RecursionError):
            continue
        if isinstance(raw, dict):
            seq = next_seq if packed else int(match.group(1))
            next_seq += 1
            yield match.group(2), seq, raw


def _checkpoint(
    name: str,
    cid: str,
    seq: int,
    doc: dict[str, object],
    objects: dict[int, tuple[str, dict[str, object]]],
) -> Checkpoint | str:
    """The checkpoint, or why it cannot be moved."""
    where = f"checkpoint {cid} of {name}"
    version = doc.get("version")
    if doc.get("format") != "koog.checkpoint" or not isinstance(version, int):
        return f"{where} was not readable; it was not moved"
    if version != CHECKPOINT_FORMAT_VERSION:  # kept as it was: listed, never used
        kind = doc.get("kind") if doc.get("kind") in ("restore", "step", "tombstone") else "restore"
        at = str(doc.get("created_at", ""))
        return Checkpoint(cid, name, seq, kind, at, format_version=version)  # type: ignore[arg-type]
    try:
        runs: list[list[int]] = doc["messages"]  # type: ignore[assignment]
        seqs = [s for start, end in runs for s in range(int(start), int(end) + 1)]
        found = [objects[s] for s in seqs]
        for key, message in found:
            line = json.dumps(message, ensure_ascii=False).encode()
            if hashlib.sha256(line).hexdigest()[:24] != key[:24]:
                return f"{where}: a message was changed after it was stored; it was not moved"
        messages = parse_messages([m for _, m in found], where)
        details = doc.get("details")
        return Checkpoint(
            id=cid,
            session=name,
            seq=seq,
            kind=doc["kind"],  # type: ignore[arg-type]
            created_at=str(doc["created_at"]),
            messages=tuple(messages),
            reason=str(doc.get("reason") or ""),
            label=_text(doc.get("label")),
            manual=bool(doc.get("manual")),
            turn_id=_text(doc.get("turn_id")),
            step=_text(doc.get("step")),
            output=_text(doc.get("output")),
            details=dict(details) if isinstance(details, dict) else {},
        )
    except (KeyError, TypeError, ValueError, KoogError):
        return f"{where}: its messages are gone or damaged; it was not moved"


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None

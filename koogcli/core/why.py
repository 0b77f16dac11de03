"""What shaped one model request (SPEC §5.17, `koog why`), recorded with the reply.

Small on purpose: ids and counts, never copies of text, so it can ride in the reply's
`meta` (history and transcript alike) and stays true after the history changes: the
transcript keeps every reply, compression and rollback do not touch it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from koogcli.core.messages import Message, clients_calls

KEY = "why"
VERSION = 1
FIRST = 5  # ids kept of what each preprocessor removed


@dataclass(frozen=True, slots=True)
class StepTrace:
    """One preprocessor's effect on the loaded history."""

    kind: str
    before: int
    after: int
    removed: tuple[str, ...] = ()  # ids of the first few messages it removed
    changed: int = 0  # messages it kept but rewrote (redaction)


@dataclass(frozen=True, slots=True)
class Why:
    model: str
    temperature: float | None
    stream: bool
    tools: int
    system_source: str  # where the system prompt came from
    system_chars: int
    preprocessors: tuple[StepTrace, ...] = ()
    summary: dict[str, str] | None = None  # {"id", "kind", "created_at"} of the one in effect
    # {"mode", "namespace", "records": [{"id", "score"}], "earlier" (records sent again)}
    memory: dict[str, Any] | None = None
    estimate: int | None = None
    limit: int | None = None
    compressed_before: bool = False  # automatic compression ran before this turn
    recovered: bool = False  # the server refused the first request as too long
    mcp_tools: tuple[str, ...] = ()  # the MCP servers' tools among those offered
    # A client's request in the upstream's protocol, sent as it came: no preprocessor
    # shaped it (koog's records were appended after its questions).
    passed_through: bool = False
    version: int = field(default=VERSION)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Why | None:
        """None for a record this koog cannot read (a newer version, or damaged)."""
        try:
            if raw.get("version") != VERSION:
                return None
            steps = tuple(
                StepTrace(
                    str(s["kind"]),
                    int(s["before"]),
                    int(s["after"]),
                    tuple(map(str, s.get("removed", ()))),
                    int(s.get("changed", 0)),
                )
                for s in raw.get("preprocessors", ())
            )
            return cls(
                model=str(raw["model"]),
                temperature=raw.get("temperature"),
                stream=bool(raw.get("stream")),
                tools=int(raw.get("tools", 0)),
                system_source=str(raw.get("system_source", "")),
                system_chars=int(raw.get("system_chars", 0)),
                preprocessors=steps,
                summary=raw.get("summary"),
                memory=raw.get("memory"),
                estimate=raw.get("estimate"),
                limit=raw.get("limit"),
                compressed_before=bool(raw.get("compressed_before")),
                recovered=bool(raw.get("recovered")),
                mcp_tools=tuple(map(str, raw.get("mcp_tools", ()))),
                passed_through=bool(raw.get("passed_through")),
            )
        except (KeyError, TypeError, ValueError):
            return None


def sent_records(w: Why) -> list[Mapping[str, Any]]:
    """Every record the request carried, `{"id", "score", "question"}` (a reply recorded
    before koog named them all has this question's only, with no question)."""
    memory = w.memory or {}
    sent = memory.get("sent")
    if sent is None:
        sent = memory.get("records") or []
    return [r for r in sent if isinstance(r, Mapping) and isinstance(r.get("id"), str)]


def trace(kind: str, before: Sequence[Message], after: Sequence[Message]) -> StepTrace:
    kept = {m.id: m for m in after}
    removed = [m.id for m in before if m.id not in kept]
    changed = sum(1 for m in before if m.id in kept and kept[m.id].content != m.content)
    return StepTrace(kind, len(before), len(after), tuple(removed[:FIRST]), changed)


def summary_in_effect(history: Sequence[Message]) -> dict[str, str] | None:
    for m in reversed(history):
        kind = m.meta.get("kind")
        if kind in ("summary", "facts"):
            found = {"id": m.id, "kind": str(kind), "created_at": m.created_at}
            strategy = m.meta.get("strategy")
            if isinstance(strategy, str):
                found["strategy"] = strategy
            return found
    return None


def of(m: Message) -> Why | None:
    raw = m.meta.get(KEY)
    return Why.from_dict(raw) if isinstance(raw, Mapping) else None


def replies(
    entries: Iterable[tuple[Message, int]],
) -> tuple[dict[int, tuple[Message, Why]], tuple[int, ...]]:
    """Each answered turn's reply with what shaped it, and the cancelled turns, from a
    transcript's messages with their turn numbers. A turn's last assistant message
    decides: a partial reply marked cancelled (Ctrl-C while it streamed) makes the turn
    cancelled, whatever requests it made before; calls koog had still to run mean it never
    got its reply (failed, cancelled between steps, or left for resume). Only a reply that
    ends its turn is explained, so no such turn passes for answered."""
    last: dict[int, Message] = {}
    for message, number in entries:
        if message.role == "assistant":
            last[number] = message
    answered: dict[int, tuple[Message, Why]] = {}
    cancelled: list[int] = []
    for number, message in last.items():
        found = of(message)
        if message.meta.get("cancelled"):
            cancelled.append(number)
        elif found is not None and not (message.tool_calls and not clients_calls(message)):
            answered[number] = (message, found)
    return answered, tuple(sorted(cancelled))


@dataclass(frozen=True, slots=True)
class Explained:
    """A reply and what shaped it (`koog why`)."""

    session: str
    turn: int  # 1-based, among the turns that wrote to the session's transcript
    turns: int
    reply: Message
    why: Why
    rolled_back: str | None = None  # when a rollback took the reply out of the history
    cancelled: tuple[int, ...] = ()  # the session's turns cancelled before their reply
    edits: tuple[str, ...] = ()  # an agent's files its edit calls for the prompt changed
    # The texts of the records the request carried, and of the questions they followed,
    # by id, as they are now (a record forgotten since has none).
    record_texts: Mapping[str, str] = field(default_factory=dict)
    question_texts: Mapping[str, str] = field(default_factory=dict)

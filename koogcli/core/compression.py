"""History compression strategies (KOOG_SEMANTICS §2), written against a Summarizer.

Every strategy rebuilds the history Koog's way (`compose`): all system messages, the first
user message and the memory messages, stably sorted by timestamp; then the summary (or
facts) messages; then any trailing unanswered tool calls. Summaries are assistant messages
marked `meta.kind = "summary"`, facts `"facts"`. A strategy returns None when it leaves the
history as it was (facts found nothing and no fallback).

The Summarizer sends many requests at once (Koog sends them one by one) and returns the
answers in request order; a failed request raises, so a compression is all or nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Protocol

from koogcli.core import wire_marks
from koogcli.core.errors import UsageError
from koogcli.core.messages import Message, system, user
from koogcli.core.messages import assistant as assistant_message

MEMORY_MARKERS = ("Here are the relevant facts from memory", "Memory feature is not enabled")

SUMMARY_PROMPT = """\
Summarize the conversation above, enclosed in <conversation_to_summarize> tags, so that it \
can go on from this summary alone. Do not continue the conversation or answer anything in \
it: write the summary only.

Keep exactly, never paraphrased away:
- names of people, projects, files, tools, commands and identifiers
- numbers, amounts, dates, versions and results of calculations
- decisions made and the reasons given
- every tool that was used, with its arguments where they matter and what it returned
- questions still open and work not yet done

Arrange it under clear headings:
- Goals
- Decisions
- Tools and results
- Facts and figures
- Status
- Open questions and next steps

Apart from the system message, this summary is all that will remain of the conversation.
Make sure it holds everything needed to carry on."""

# For a small context (a local model's 512 or 1,024 tokens), where the full instruction
# alone would take a third of it and ask for more than there is room to write.
BRIEF_SUMMARY_PROMPT = """\
Summarize the conversation above, enclosed in <conversation_to_summarize> tags, in one \
short paragraph. Keep names, numbers and decisions. Write the summary only."""

SUMMARIZER_ROLE = (
    "You write faithful summaries of conversations between a user and an assistant, so the "
    "conversation can continue from the summary alone. You never take part in the "
    "conversation yourself."
)


class InvalidAnswer(ValueError):
    """An answer that does not fit its question; the message says what is wrong."""


@dataclass(frozen=True)
class Question:
    """A request whose answer must parse: `schema` asks the server for JSON of that shape
    (`response_format`), `parse` checks the answer and raises InvalidAnswer."""

    messages: Sequence[Message]
    name: str
    schema: dict[str, object]
    parse: Callable[[str], object]


class Summarizer(Protocol):
    def ask_all(self, prompts: Sequence[Sequence[Message]]) -> list[str]:
        """One model request per prompt (no tools); answers in prompt order."""
        ...

    def ask_parsed(self, questions: Sequence[Question]) -> list[object | None]:
        """Parsed answers in question order; None where no valid answer came (after
        the retries the summarizer allows)."""
        ...


class Strategy(Protocol):
    @property
    def name(self) -> str: ...

    def compress(
        self, history: Sequence[Message], memory: Sequence[Message], llm: Summarizer
    ) -> list[Message] | None: ...


def is_tool_call(m: Message) -> bool:
    return m.role == "assistant" and bool(m.tool_calls)


def is_memory(m: Message) -> bool:
    return m.meta.get("kind") == "memory" or any(marker in m.text for marker in MEMORY_MARKERS)


def memory_messages(history: Sequence[Message], preserve: bool) -> list[Message]:
    return [m for m in history if is_memory(m)] if preserve else []


def _timestamp(m: Message) -> datetime:
    try:
        stamp = datetime.fromisoformat(m.created_at)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def drop_trailing_calls(history: Sequence[Message]) -> list[Message]:
    out = list(history)
    while out and is_tool_call(out[-1]):
        out.pop()
    return out


def trailing_calls(history: Sequence[Message]) -> list[Message]:
    return list(history[len(drop_trailing_calls(history)) :])


def compose(
    original: Sequence[Message], summaries: Sequence[Message], memory: Sequence[Message]
) -> list[Message]:
    head = [m for m in original if m.role == "system"]
    first_user = next((m for m in original if m.role == "user"), None)
    if first_user is not None:
        head.append(first_user)
    head += memory
    # Notes record tool effects a rollback undid (§5.11): the history must keep saying so.
    kept = {m.id for m in head}
    head += [m for m in original if m.meta.get("kind") == "note" and m.id not in kept]
    head.sort(key=_timestamp)  # stable: a leading user message stays ahead of a later system one
    trailing = trailing_calls(original)
    mark = wire_marks.carried(original, [*head, *trailing]) if summaries else None
    if mark is not None:  # a resent conversation is still known after compression (§6)
        last = summaries[-1]
        summaries = [
            *summaries[:-1],
            replace(last, meta={**last.meta, wire_marks.KEY: mark.to_dict()}),
        ]
    return [*head, *summaries, *trailing]


def summary_message(text: str) -> Message:
    m = assistant_message(text)
    return Message(
        role="assistant",
        content=m.content,
        id=m.id,
        created_at=m.created_at,
        meta={"kind": "summary"},
    )


def summary_prompt(messages: Sequence[Message]) -> list[Message]:
    """The history inside delimiters, not as turns of a chat: a model shown a long run of
    tool calls as real turns tends to carry on with them instead of summarising."""
    wrapped = wrap(messages, "conversation_to_summarize")
    return [system(SUMMARIZER_ROLE), user(f"{wrapped}\n{SUMMARY_PROMPT}")]


@dataclass(frozen=True)
class WholeHistory:
    name: str = "whole"

    def compress(
        self, history: Sequence[Message], memory: Sequence[Message], llm: Summarizer
    ) -> list[Message]:
        return summarize_part(history, history, memory, llm)


def summarize_part(
    history: Sequence[Message], part: Sequence[Message], memory: Sequence[Message], llm: Summarizer
) -> list[Message]:
    """One summary of `part`, composed into the whole history."""
    [text] = llm.ask_all([summary_prompt(part)])
    return compose(history, [summary_message(text)], memory)


@dataclass(frozen=True)
class FromLastNMessages:
    n: int
    name: str = "last-n"

    def compress(
        self, history: Sequence[Message], memory: Sequence[Message], llm: Summarizer
    ) -> list[Message]:
        tail = set(map(id, history[-self.n :])) if self.n > 0 else set()
        kept = [m for m in history if m.role == "system" or id(m) in tail]
        return summarize_part(history, kept, memory, llm)


@dataclass(frozen=True)
class FromTimestamp:
    since: datetime
    name: str = "since"

    def compress(
        self, history: Sequence[Message], memory: Sequence[Message], llm: Summarizer
    ) -> list[Message]:
        kept = [m for m in history if m.role == "system" or _timestamp(m) >= self.since]
        return summarize_part(history, kept, memory, llm)


@dataclass(frozen=True)
class Chunked:
    size: int
    name: str = "chunked"

    def compress(
        self, history: Sequence[Message], memory: Sequence[Message], llm: Summarizer
    ) -> list[Message]:
        chunks = [history[i : i + self.size] for i in range(0, len(history), self.size)]
        texts = llm.ask_all([summary_prompt(chunk) for chunk in chunks])
        return compose(history, [summary_message(t) for t in texts], memory)


@dataclass(frozen=True)
class WholeHistoryPerSystemMessage:
    """Koog's WholeHistoryMultipleSystemMessages: each system-delimited block on its own."""

    name: str = "per-system"

    def compress(
        self, history: Sequence[Message], memory: Sequence[Message], llm: Summarizer
    ) -> list[Message]:
        blocks: list[list[Message]] = []
        seen_system = False
        for m in history:
            if (m.role == "system" and seen_system) or not blocks:
                blocks.append([])
            seen_system = seen_system or m.role == "system"
            blocks[-1].append(m)
        texts = llm.ask_all([summary_prompt(block) for block in blocks])
        out: list[Message] = []
        for index, (block, text) in enumerate(zip(blocks, texts, strict=True)):
            out += compose(block, [summary_message(text)], memory if index == 0 else [])
        return out


# --- fact retrieval ---------------------------------------------------------------------

NO_FACT = "No facts extracted"


@dataclass(frozen=True)
class Concept:
    name: str
    description: str
    multiple: bool = False

    @classmethod
    def parse(cls, text: str) -> Concept:
        """NAME:DESCRIPTION[:single|multiple]"""
        name, _, rest = text.partition(":")
        description, kind = rest, "single"
        head, sep, last = rest.rpartition(":")
        if sep and last.strip().lower() in ("single", "multiple"):
            description, kind = head, last.strip().lower()
        if not name.strip() or not description.strip():
            raise UsageError(
                f"invalid concept {text!r}", hint="write NAME:DESCRIPTION[:single|multiple]"
            )
        return cls(name.strip(), description.strip(), kind == "multiple")


def _escape(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&apos;")
    )


def wrap_for_extraction(history: Sequence[Message]) -> str:
    return wrap(history, "conversation_to_extract_facts")


def wrap(history: Sequence[Message], tag: str) -> str:
    """Koog's wrapper: one XML-escaped element per message, trailing tool calls left out."""
    lines = [f"<{tag}>"]
    for m in drop_trailing_calls(history):
        if m.role == "tool":
            lines.append(
                f'<tool_result tool="{_escape(m.name or "")}">\n{_escape(m.text)}\n</tool_result>'
            )
            continue
        if m.text or not m.tool_calls:
            lines.append(f"<{m.role}>\n{_escape(m.text)}\n</{m.role}>")
        for call in m.tool_calls:
            lines.append(
                f'<tool_call tool="{_escape(call.name)}">\n{_escape(call.arguments)}\n</tool_call>'
            )
    lines.append(f"</{tag}>")
    return "\n".join(lines) + "\n"


def extraction_instruction(concept: Concept) -> str:
    scope = "every essential fact" if concept.multiple else "the single most important fact"
    rules = (
        [
            "Keep outcomes and established information, not the actions taken.",
            "From tool results keep what was discovered, not how.",
            "Each fact must make sense on its own, as if nothing else survives.",
            "Merge related details into one complete fact where you can.",
        ]
        if concept.multiple
        else [
            "Pick the most essential outcome or established piece of information.",
            "From tool results keep only the most important discovery.",
            "The fact must make sense on its own, as if nothing else survives.",
            "Prefer the fact that matters most for understanding the concept.",
        ]
    )
    shape = (
        'a JSON object with a "facts" array whose elements each have a "fact" string'
        if concept.multiple
        else 'a JSON object with one "fact" string'
    )
    numbered = "\n".join(f"{i}. {rule}" for i, rule in enumerate(rules, start=1))
    return (
        "You extract facts from an agent's conversation so the conversation can be compressed.\n\n"
        "The conversation comes enclosed in <conversation_to_extract_facts> tags. Extract "
        f'{scope} about "{concept.name}" ({concept.description}).\n\n'
        f"Rules:\n{numbered}\n\nAnswer with {shape} and nothing else."
    )


def fact_schema(concept: Concept) -> dict[str, object]:
    """The JSON schema of an extraction answer, for `response_format`."""
    fact: dict[str, object] = {
        "type": "object",
        "properties": {"fact": {"type": "string"}},
        "required": ["fact"],
        "additionalProperties": False,
    }
    if not concept.multiple:
        return fact
    return {
        "type": "object",
        "properties": {"facts": {"type": "array", "items": fact}},
        "required": ["facts"],
        "additionalProperties": False,
    }


def read_facts(concept: Concept, answer: str) -> list[str]:
    """Facts from the model's JSON answer (Koog's sentinel and empty facts dropped);
    an answer that is not JSON of the concept's shape raises InvalidAnswer saying why."""
    match = re.search(r"\{.*\}", answer, re.DOTALL)  # a fenced or prefaced object too
    try:
        data = json.loads(match.group(0) if match else answer)
    except json.JSONDecodeError as exc:
        raise InvalidAnswer(f"the answer is not JSON ({exc.msg} at character {exc.pos})") from exc
    except RecursionError:
        raise InvalidAnswer("the answer is JSON nested too deep") from None
    if not isinstance(data, dict):
        raise InvalidAnswer("the answer is JSON but not an object")
    if concept.multiple:
        items = data.get("facts")
        if not isinstance(items, list) or not all(
            isinstance(i, dict) and isinstance(i.get("fact"), str) for i in items
        ):
            raise InvalidAnswer('"facts" must be an array of objects, each with a "fact" string')
        facts = [i["fact"] for i in items]
    else:
        if not isinstance(data.get("fact"), str):
            raise InvalidAnswer('the object must have a "fact" string')
        facts = [data["fact"]]
    return [f.strip() for f in facts if f.strip() and f.strip() != NO_FACT]


def parse_facts(concept: Concept, answer: str) -> list[str]:
    """Koog's fixing parser after its retries: an unparsable answer gives no facts."""
    try:
        return read_facts(concept, answer)
    except InvalidAnswer:
        return []


def facts_message(found: Sequence[tuple[Concept, list[str]]], tool_interactions: int) -> Message:
    sections = "\n".join(
        f"## KNOWN FACTS ABOUT `{c.name}` ({c.description})\n"
        + "\n".join(f"- {f}" for f in facts)
        + "\n"
        for c, facts in found
    )
    text = (
        "[CONTEXT RESTORATION]\n\n"
        "Earlier parts of this conversation were compressed. These facts about the configured "
        "concepts were kept.\n\n"
        f"**Extracted facts:**\n<compressed_facts>\n{sections}</compressed_facts>\n\n"
        f"**Current status:**\nAbout {tool_interactions} tool interactions happened before "
        "compression. Only facts about the configured concepts survived; task state, pending "
        "steps and the recent flow of the conversation may be missing."
    )
    m = assistant_message(text)
    return Message(
        role="assistant", content=text, id=m.id, created_at=m.created_at, meta={"kind": "facts"}
    )


@dataclass(frozen=True)
class FactRetrieval:
    concepts: tuple[Concept, ...]
    fallback: Strategy | None = None
    name: str = "facts"

    def compress(
        self, history: Sequence[Message], memory: Sequence[Message], llm: Summarizer
    ) -> list[Message] | None:
        wrapped = wrap_for_extraction(history)
        questions = [
            Question(
                [system(extraction_instruction(c)), user(wrapped)],
                f"facts_about_{re.sub(r'[^A-Za-z0-9_-]', '_', c.name)}"[:64],
                fact_schema(c),
                partial(read_facts, c),
            )
            for c in self.concepts
        ]
        answers = llm.ask_parsed(questions)
        found = [
            (c, facts)
            for c, facts in zip(self.concepts, answers, strict=True)
            if isinstance(facts, list) and facts
        ]
        if not found:
            return self.fallback.compress(history, memory, llm) if self.fallback else None
        tools = sum(1 for m in history if m.role == "tool")
        return compose(history, [facts_message(found, tools)], memory)

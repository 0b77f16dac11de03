"""History preprocessors (KOOG_SEMANTICS §1.4), applied as a left fold at load and at store.

Order matters: window-then-filter differs from filter-then-window (SPEC §5.3).
The window keeps Koog's newest pairing rule (§5.4): results are matched to calls FIFO per
key (("id", call id) or ("anon", tool name)); a result whose call fell outside the window
is dropped, so no tool result is ever orphaned. Non-tool messages are never modified.
The token window keeps the same rule over a budget of estimated tokens.

koog's deliberate deviation (KOOG_SEMANTICS §1.4, issue 42): both windows move their start
in steps, counted from the start of the list they are given, so the start stays put while
the conversation grows and a server's prompt cache (llama.cpp's KV slot, OpenAI's prefix
cache) holds between cuts. With a step of 1 they are Koog's rule exactly. A window never
holds more than its size (or budget), and applying it to its own output changes nothing.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from koogcli.core import content_parts
from koogcli.core.errors import ConfigError
from koogcli.core.messages import Message, Role
from koogcli.core.why import StepTrace, trace


class Preprocessor(Protocol):
    def __call__(self, messages: list[Message]) -> list[Message]: ...


class TextPattern(Protocol):
    """A compiled regular expression (`re.Pattern`, or a time-bounded one from config)."""

    def search(self, text: str, /) -> object | None: ...

    def sub(self, replacement: str, text: str, /) -> str: ...


@dataclass(frozen=True, slots=True)
class FilterPreprocessor:
    """Keep the messages that satisfy every given condition."""

    roles: frozenset[Role] | None = None
    min_chars: int | None = None
    max_chars: int | None = None
    include_regex: TextPattern | None = None
    exclude_regex: TextPattern | None = None

    def keeps(self, m: Message) -> bool:
        text = m.text
        return (
            (self.roles is None or m.role in self.roles)
            and (self.min_chars is None or len(text) >= self.min_chars)
            and (self.max_chars is None or len(text) <= self.max_chars)
            and (self.include_regex is None or self.include_regex.search(text) is not None)
            and (self.exclude_regex is None or self.exclude_regex.search(text) is None)
        )

    def __call__(self, messages: list[Message]) -> list[Message]:
        return [m for m in messages if self.keeps(m)]


@dataclass(frozen=True, slots=True)
class PredicateFilter:
    """Koog's FilterMessagesPreProcessor: any predicate (used by tests and custom code)."""

    predicate: Callable[[Message], bool]

    def __call__(self, messages: list[Message]) -> list[Message]:
        return [m for m in messages if self.predicate(m)]


def _call_key(call_id: str | None, name: str | None) -> tuple[str, str]:
    # Id keys and anonymous (name) keys never match each other.
    return ("id", call_id) if call_id is not None else ("anon", name or "")


def _from(messages: list[Message], start: int, pinned: Sequence[bool] = ()) -> list[Message]:
    """Messages from `start` on, plus pinned ones anywhere; a tool result whose call is
    not kept is dropped too (calls and results paired FIFO per key)."""
    pending: dict[tuple[str, str], deque[int]] = defaultdict(deque)
    out: list[Message] = []
    for index, m in enumerate(messages):
        for call in m.tool_calls:
            pending[_call_key(call.id, call.name)].append(index)
        kept = index >= start or (bool(pinned) and pinned[index])
        if m.role == "tool":
            queue = pending[_call_key(m.tool_call_id, m.name)]
            call_index = queue.popleft() if queue else None
            kept = kept and call_index is not None and call_index >= start
        if kept:
            out.append(m)
    return out


def default_step(size: int) -> int:
    """The step of a `window` whose config names none: a quarter of the size, or 6 when
    that is more (three quarters of the size when 6 is too much), between 1 and the size.

    Why not simply a quarter: a turn adds two messages (question and answer), so a window
    of 8 stepping by 2 would cut on every turn, and every cut makes the server read the
    whole request again. A step of 6 keeps the prefix two turns in three. Three quarters
    bounds it for small windows: 4 steps by 3 and still holds 2 messages after a cut.
    8 -> 6, 16 -> 6, 50 -> 12, 4 -> 3, 2 -> 1, 1 -> 1.
    """
    return max(1, min(size, max(size // 4, min(6, size * 3 // 4))))


def default_step_tokens(max_tokens: int) -> int:
    """The step of a `token_window` whose config names none: a quarter of its tokens."""
    return max(1, max_tokens // 4)


def _stepped(excess: int, step: int) -> int:
    """`excess` rounded up to a multiple of `step` (0 when nothing is over)."""
    return 0 if excess <= 0 else -(-excess // step) * step


def _opens(m: Message) -> bool:
    """Where a stepped window may begin: a question, or a summary compression left (the
    context it stands for is worth more than the turn after it)."""
    return m.role == "user" or m.meta.get("kind") in ("summary", "facts")


@dataclass(frozen=True, slots=True)
class WindowPreprocessor:
    """The last messages, at most `size` of them (Koog's WindowSizePreProcessor).

    The start is `step * ceil((L - size) / step)` for L > size messages, else 0: it moves
    `step` messages at a time, so the window holds between `size - step + 1` and `size`
    messages and stays put while `step` more arrive. `step = 1` is Koog's `L - size`. A
    step above the size acts as the size. A stepped window then moves its start on to the
    next user message or summary (never opening with an answer or a tool call), and the pairing rule
    (`_from`) may drop results whose call fell before the start, so a window can hold fewer."""

    size: int
    step: int = 1  # config's default is `default_step(size)` (services/compose.py)

    def start(self, count: int) -> int:
        step = max(1, min(self.step, self.size))
        return _stepped(count - self.size, step)

    def __call__(self, messages: list[Message]) -> list[Message]:
        start = self.start(len(messages))
        if self.step > 1:
            # A stepped window begins at a question: strict chat templates (Gemma's, Mistral's)
            # refuse a conversation that opens with an answer, and the start stays a function
            # of the stepped one, so the prefix holds between cuts as before.
            while start < len(messages) and not _opens(messages[start]):
                start += 1
        return _from(messages, start)


@dataclass(frozen=True, slots=True)
class TokenWindowPreprocessor:
    """The newest messages whose estimated tokens (core/tokens.py) fit `max_tokens`.

    System messages and memory messages are always kept and counted first; what is left,
    B, is the budget of the others. Those kept form one run to the newest, no message
    skipped between; as before steps, the run may begin with an answer whose question did
    not fit (nothing here guarantees a question beside its answer).
    Each has a position: the tokens of the other messages before it in the list. When
    their total T passes B, the run begins at the first one positioned at or after
    `step_tokens * ceil((T - B) / step_tokens)`, so it starts later only when the excess
    crosses a multiple of the step, and holds at most B tokens; the newest message stays
    whenever it fits B alone. `step_tokens = 1` is the newest run that fits, exactly as
    before steps (issue 42). A step above B acts as B."""

    max_tokens: int
    count: Callable[[Message], int] | None = None  # None: core/tokens.py's estimate
    step_tokens: int = 1  # config's default is `default_step_tokens(max_tokens)`

    def __call__(self, messages: list[Message]) -> list[Message]:
        from koogcli.core.compression import is_memory
        from koogcli.core.tokens import message_tokens

        count = self.count or message_tokens
        pinned = [m.role == "system" or is_memory(m) for m in messages]
        sizes = [count(m) for m in messages]
        budget = self.max_tokens - sum(n for n, kept in zip(sizes, pinned, strict=True) if kept)
        total = sum(n for n, kept in zip(sizes, pinned, strict=True) if not kept)
        threshold = _stepped(total - budget, max(1, min(self.step_tokens, budget)))
        others = [index for index, kept in enumerate(pinned) if not kept]
        start, position = len(messages), 0
        for index in others:
            if position >= threshold:
                start = index
                break
            position += sizes[index]
        if others and sizes[others[-1]] <= budget:
            start = min(start, others[-1])  # a step never costs the newest message that fits
        return _from(messages, start, pinned)


@dataclass(frozen=True, slots=True)
class RedactPreprocessor:
    pattern: TextPattern
    replacement: str = "[REDACTED]"

    def __call__(self, messages: list[Message]) -> list[Message]:
        return [
            _redacted(m, self.pattern.sub(self.replacement, m.content))
            if m.content is not None and self.pattern.search(m.content)
            else m
            for m in messages
        ]


def _redacted(m: Message, text: str) -> Message:
    """The message with its text redacted, and its text parts too: kept parts (an image
    beside the text) must not keep what the text no longer says."""
    given = content_parts.parts(m)
    if given is None:
        return m.with_content(text)
    parts = content_parts.with_text(given, text)
    return replace(m, content=text, meta={**m.meta, content_parts.KEY: parts})


@dataclass(frozen=True, slots=True)
class CustomPreprocessor:
    """A user callable `list[Message] -> list[Message]`; failures name the callable."""

    spec: str
    function: Callable[..., object]

    def __call__(self, messages: list[Message]) -> list[Message]:
        try:
            result = self.function(list(messages))
        except Exception as exc:  # user code: report it as a configuration problem
            raise ConfigError(
                f"custom preprocessor {self.spec!r} raised {type(exc).__name__}: {exc}",
                hint="fix the function or remove it from [[chat_memory.preprocessors]]",
            ) from exc
        if not isinstance(result, list) or not all(isinstance(m, Message) for m in result):
            raise ConfigError(
                f"custom preprocessor {self.spec!r} returned {type(result).__name__}, "
                "not a list of Message"
            )
        return result


@dataclass(frozen=True, slots=True)
class Pipeline:
    steps: Sequence[Preprocessor] = ()

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        acc = list(messages)
        for step in self.steps:
            acc = step(acc)
        return acc

    def traced(self, messages: Sequence[Message]) -> tuple[list[Message], tuple[StepTrace, ...]]:
        """The result, and what each step did (`koog why`): counts and the first ids."""
        acc = list(messages)
        traces = []
        for step in self.steps:
            done = step(acc)
            traces.append(trace(_KINDS.get(type(step).__name__, type(step).__name__), acc, done))
            acc = done
        return acc, tuple(traces)

    def redact(self, messages: Sequence[Message]) -> list[Message]:
        """Only the redact steps, in order: what koog writes anywhere (transcript,
        checkpoints, memory records) carries no redacted pattern, while the request of the
        turn in progress is sent as typed (Koog's order)."""
        acc = list(messages)
        for step in self.steps:
            if isinstance(step, RedactPreprocessor):
                acc = step(acc)
        return acc

    def redacts(self, text: str) -> str:
        for step in self.steps:
            if isinstance(step, RedactPreprocessor):
                text = step.pattern.sub(step.replacement, text)
        return text


_KINDS = {
    "FilterPreprocessor": "filter",
    "WindowPreprocessor": "window",
    "TokenWindowPreprocessor": "token_window",
    "RedactPreprocessor": "redact",
    "CustomPreprocessor": "custom",
}

"""How many tokens a request will cost, without a tokenizer (no download, no dependency).

The raw count imitates a byte-pair tokenizer of the GPT family: a common English word is
one token and a long one more, digits go in threes, each symbol is a token, text outside
ASCII costs about a token per three and a half UTF-8 bytes (a CJK character about one),
a line break one, and every message a few for its framing. No rule of thumb fits every
tokenizer, so the count is calibrated, in two parts:
- A reply's own tokens are known: the server reported them (`usage.completion_tokens`) and
  they are what the reply costs when it is sent back. They are used as they are, unless
  they are far from the reply's text (a reasoning model counts its hidden reasoning too).
- Everything else (system prompt, user messages, tool results, replies without a usable
  count) is the raw count times a ratio. Each assistant message records, for the request
  that produced it, the raw count of those parts (`meta.estimate`) and the tokens known or
  fixed (`meta.estimate_known`: the replies' own counts and every message's framing), so
  the ratio is what the server's `prompt_tokens` left for the raw parts. A prose-only first
  request thus calibrates prose, and a session whose replies are tables and code is not
  scaled by it. Compression keeps the ratios on the summary it writes
  (`meta.calibration`), so a compressed session stays calibrated.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from koogcli.core.messages import Message

PER_MESSAGE = 4  # role and separators around each message
PER_REQUEST = 3  # the priming of the reply
# A question's memory records placed after it (core/memory_placement.py), as estimated when
# placed: part of the message's size in every request that sends it.
PLACED_TOKENS = "memory_placed_tokens"
# A reply's reported count is taken when it is within this factor of its raw count.
_PLAUSIBLE = (0.5, 2.0)
_RATIO_BOUNDS = (0.25, 4.0)
_MIN_RAW = 8  # fewer raw tokens than this say too little about the ratio

_PIECES = re.compile(r"[A-Za-z]+|\d+|[^\x00-\x7f]+|\n+|[^\sA-Za-z\d]")


def text_tokens(text: str) -> int:
    """Raw token count of one text; a text of up to 4,096 characters is counted once per
    process (a server counts the whole resent conversation for every request). Two memos:
    65,536 texts of up to 512 characters (32 MiB of ASCII at most) and 4,096 longer ones
    (16 MiB): a conversation longer than its memo would be counted afresh every request,
    an LRU evicting each text just before it is asked for again."""
    if len(text) <= 512:
        return _counted_short(text)
    return _counted(text) if len(text) <= 4096 else _count(text)


@functools.lru_cache(maxsize=65536)
def _counted_short(text: str) -> int:
    return _count(text)


@functools.lru_cache(maxsize=4096)
def _counted(text: str) -> int:
    return _count(text)


def _count(text: str) -> int:
    count = 0
    for piece in _PIECES.findall(text):
        first = piece[0]
        if first.isascii():
            if first.isalpha():
                count += 1 + len(piece) // 8
            elif first.isdigit():
                count += -(-len(piece) // 3)
            else:
                count += 1
        else:
            count += max(1, round(len(piece.encode()) / 3.5))
    return count


def content_tokens(m: Message) -> int:
    """Raw count of what a message says: its text and tool calls, without framing."""
    count = text_tokens(m.text)
    placed = m.meta.get(PLACED_TOKENS)  # §5 4a: records sent after a question, every request
    if isinstance(placed, int) and not isinstance(placed, bool) and placed > 0:
        count += placed
    for call in m.tool_calls:
        count += 3 + text_tokens(call.name) + text_tokens(call.arguments)
    return count


def message_tokens(m: Message) -> int:
    """Raw token count of one message as sent: content, tool calls and framing."""
    return PER_MESSAGE + (m.name is not None) + content_tokens(m)


def request_tokens(messages: Iterable[Message]) -> int:
    """Raw token count of a whole request's messages."""
    return PER_REQUEST + sum(message_tokens(m) for m in messages)


def reply_tokens(m: Message) -> int | None:
    """The server's own count of an assistant reply, when it reported one that fits."""
    if m.role != "assistant":
        return None
    usage = m.meta.get("usage")
    reported = usage.get("completion_tokens") if isinstance(usage, dict) else None
    raw = content_tokens(m)
    if not isinstance(reported, int) or reported <= 0 or raw <= 0:
        return None
    low, high = _PLAUSIBLE
    return reported if low <= reported / raw <= high else None


def parts(messages: Iterable[Message]) -> tuple[int, int]:
    """(known, raw): the tokens known or fixed in a request (framing and the replies' own
    counts), and the raw count of the rest, which a ratio scales."""
    known, raw = PER_REQUEST, 0
    for m in messages:
        known += PER_MESSAGE + (m.name is not None)
        exact = reply_tokens(m)
        if exact is None:
            raw += content_tokens(m)
        else:
            known += exact
    return known, raw


@dataclass(frozen=True, slots=True)
class Calibration:
    """Reported tokens per raw token, learned from the model's last request in a session."""

    ratio: float = 1.0
    calibrated: bool = False

    def scale(self, raw: int) -> int:
        return round(raw * self.ratio)

    def request(self, messages: Sequence[Message]) -> int:
        """A request's estimated tokens."""
        known, raw = parts(messages)
        return known + self.scale(raw)

    def message(self, m: Message) -> int:
        """One message's estimated tokens, framing included."""
        exact = reply_tokens(m)
        framing = PER_MESSAGE + (m.name is not None)
        return framing + (exact if exact is not None else self.scale(content_tokens(m)))


def _ratio(m: Message, model: str) -> tuple[float, int] | None:
    """(ratio, raw tokens it was learned from) that `m` holds for `model`: an answer's
    own, or one carried by a summary."""
    if m.role != "assistant":
        return None
    carried = m.meta.get("calibration")
    if isinstance(carried, dict):
        value = carried.get(model)
        return (float(value), _MIN_RAW) if isinstance(value, (int, float)) and value > 0 else None
    if m.meta.get("model") != model:
        return None
    usage, estimate, known = (
        m.meta.get("usage"),
        m.meta.get("estimate"),
        m.meta.get("estimate_known"),
    )
    reported = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if not (isinstance(reported, int) and isinstance(estimate, int) and reported > 0):
        return None
    if not isinstance(known, int):  # recorded before the known parts were: the whole
        return (reported / estimate, estimate) if estimate > 0 else None
    if estimate <= 0:
        return None
    low, high = _RATIO_BOUNDS
    return min(high, max(low, (reported - known) / estimate)), estimate


def calibration(history: Sequence[Message], model: str) -> Calibration:
    """The newest ratio for `model` in the history learned from enough raw tokens (else
    the newest at all); none: uncalibrated (1.0)."""
    fallback = None
    for m in reversed(history):
        found = _ratio(m, model)
        if found is None:
            continue
        if found[1] >= _MIN_RAW:
            return Calibration(found[0], True)
        fallback = fallback or found
    return Calibration(fallback[0], True) if fallback else Calibration()


def carry(before: Sequence[Message], after: list[Message]) -> list[Message]:
    """`after` (a compressed `before`) with every model's newest ratio from `before` kept
    on its last summary or facts message."""
    models = {str(m.meta["model"]) for m in before if m.role == "assistant" and "model" in m.meta}
    for m in before:
        carried = m.meta.get("calibration")
        if isinstance(carried, dict):
            models.update(str(k) for k in carried)
    ratios = {
        model: round(scale.ratio, 4)
        for model in sorted(models)
        if (scale := calibration(before, model)).calibrated
    }
    kinds = ("summary", "facts")
    index = next(
        (i for i in range(len(after) - 1, -1, -1) if after[i].meta.get("kind") in kinds), None
    )
    if not ratios or index is None:
        return after
    target = after[index]
    marked = replace(target, meta={**target.meta, "calibration": ratios})
    return [*after[:index], marked, *after[index + 1 :]]

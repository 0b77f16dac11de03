"""How many tokens a request will cost, without a tokenizer (no download, no dependency).

The raw count imitates a byte-pair tokenizer of the GPT family: a common English word is
one token and a long one more, digits go in threes, each symbol is a token, text outside
ASCII costs about a token per three and a half UTF-8 bytes (a CJK character about one),
a line break one, and every message a few for its framing. No rule of thumb fits every
tokenizer, so the count is calibrated: each assistant message records the raw count of
the request that produced it (`meta.estimate`) beside the `prompt_tokens` the server
reported (`meta.usage`), and their ratio for the model scales later counts. Compression
keeps the ratios on the summary it writes (`meta.calibration`), so a compressed session
stays calibrated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from koogcli.core.messages import Message

PER_MESSAGE = 4  # role and separators around each message
PER_REQUEST = 3  # the priming of the reply

_PIECES = re.compile(r"[A-Za-z]+|\d+|[^\x00-\x7f]+|\n+|[^\sA-Za-z\d]")


def text_tokens(text: str) -> int:
    """Raw token count of one text."""
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


def message_tokens(m: Message) -> int:
    """Raw token count of one message as sent: content, tool calls and framing."""
    count = PER_MESSAGE + text_tokens(m.text)
    for call in m.tool_calls:
        count += 3 + text_tokens(call.name) + text_tokens(call.arguments)
    if m.name:
        count += 1
    return count


def request_tokens(messages: Iterable[Message]) -> int:
    """Raw token count of a whole request's messages."""
    return PER_REQUEST + sum(message_tokens(m) for m in messages)


@dataclass(frozen=True, slots=True)
class Calibration:
    """Reported tokens per raw token, learned from the model's last request in a session."""

    ratio: float = 1.0
    calibrated: bool = False

    def scale(self, raw: int) -> int:
        return round(raw * self.ratio)


def _ratio(m: Message, model: str) -> float | None:
    """The reported/raw ratio `m` holds for `model`: an answer's own, or one carried."""
    if m.role != "assistant":
        return None
    carried = m.meta.get("calibration")
    if isinstance(carried, dict):
        value = carried.get(model)
        return float(value) if isinstance(value, (int, float)) and value > 0 else None
    if m.meta.get("model") != model:
        return None
    usage, estimate = m.meta.get("usage"), m.meta.get("estimate")
    reported = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if isinstance(reported, int) and isinstance(estimate, int) and reported > 0 and estimate > 0:
        return reported / estimate
    return None


def calibration(history: Sequence[Message], model: str) -> Calibration:
    """The newest ratio for `model` in the history; none: uncalibrated (1.0)."""
    for m in reversed(history):
        ratio = _ratio(m, model)
        if ratio is not None:
            return Calibration(ratio, True)
    return Calibration()


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

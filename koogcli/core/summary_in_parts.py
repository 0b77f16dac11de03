"""`whole` compression for a context that one summary request of the history does not fit
(a local model's 512 or 2,048 tokens): the history in parts that each fit, a summary of
each, then a summary of those summaries (again in parts while they do not fit), so the
history ends with one summary, as `whole` gives it. A message larger than a part is cut in
its middle for its summary request only; the stored history is never cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from koogcli.core.compression import Summarizer, compose, summary_message, summary_prompt
from koogcli.core.messages import Message
from koogcli.core.tokens import message_tokens

_LEVELS = 8  # summaries of summaries at most: each level at least halves their number
_CHARS_PER_TOKEN = 3  # a cut message's text, kept well within its part


@dataclass(frozen=True)
class InParts:
    budget: int  # tokens of messages one summary request may carry
    name: str = "whole"

    def compress(
        self, history: Sequence[Message], memory: Sequence[Message], llm: Summarizer
    ) -> list[Message]:
        texts = llm.ask_all([summary_prompt(p) for p in parts(history, self.budget)])
        for _ in range(_LEVELS):
            if len(texts) == 1:
                break
            notes = [summary_message(t) for t in texts]
            grouped = parts(notes, self.budget)
            if len(grouped) >= len(texts):  # each summary fills a part: pair them up
                grouped = [notes[i : i + 2] for i in range(0, len(notes), 2)]
            texts = llm.ask_all([summary_prompt(p) for p in grouped])
        return compose(history, [summary_message(" ".join(texts))], memory)


def parts(messages: Sequence[Message], budget: int) -> list[list[Message]]:
    """The messages in order, in runs of at most `budget` tokens (a message over it alone,
    cut to fit)."""
    out: list[list[Message]] = []
    current: list[Message] = []
    used = 0
    for m in messages:
        size = message_tokens(m)
        if size > budget:
            m, size = _cut(m, budget), budget
        if current and used + size > budget:
            out.append(current)
            current, used = [], 0
        current.append(m)
        used += size
    if current:
        out.append(current)
    return out


def _cut(m: Message, budget: int) -> Message:
    keep = max(32, budget * _CHARS_PER_TOKEN // 2 - 16)
    text = m.text
    if len(text) <= 2 * keep:
        return m
    return replace(m, content=f"{text[:keep]} … {text[-keep:]}", tool_calls=())

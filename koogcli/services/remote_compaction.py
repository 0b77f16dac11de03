"""Codex's remote compaction answered by koog (SPEC §6): a Responses request whose last
input item is `compaction_trigger` (or `POST /v1/responses/compact`) expects exactly one
`compaction` item whose `encrypted_content` the client replays later in place of the
conversation it summarised. Without a Responses upstream to pass it to, koog writes the
summary with its own compression (`[compression]`, strategy "whole") and hands back a koog
handle holding it; a replayed handle is read back into the summary it holds. A handle
from anyone else cannot be read and is left out; one that says it is koog's and is not
(forged: not base64 of koog's JSON, or JSON nested past core/bounded_json.py's bound) is
refused."""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from collections.abc import Sequence

from koogcli.core import bounded_json
from koogcli.core.errors import UsageError
from koogcli.core.messages import Message
from koogcli.services.context import AppContext

HANDLE = "koog-compaction.v1:"
# What a replayed summary says before itself, so the model reads it as what it is.
LEAD = "A summary of the conversation so far, written when it was compacted:"


def summarise(ctx: AppContext, conversation: Sequence[Message], model: str | None) -> str:
    """The conversation's summary by koog's own compression (the `whole` strategy, in
    chunks when it would not fit). The agent asked for it: a summary longer than a short
    conversation is still its answer (`koog compress` would refuse to store that one)."""
    from koogcli.services.compression import StrategyChoice, build_strategy, compress_prompt

    said = [m for m in conversation if m.role != "system"]
    if not said:
        raise UsageError("the compaction request holds nothing to summarise")
    strategy = build_strategy(ctx.settings.compression, StrategyChoice(strategy="whole"))
    done = compress_prompt(ctx, said, strategy, False, model=model, must_shrink=False)
    out = done.messages or said
    summaries = [m.text for m in out if m.meta.get("kind") in ("summary", "facts")]
    return "\n\n".join(summaries) if summaries else "\n\n".join(m.text for m in out if m.text)


def item(summary: str) -> dict[str, object]:
    """The one `compaction` output item: its `encrypted_content` a koog handle."""
    packed = base64.urlsafe_b64encode(json.dumps({"summary": summary}).encode()).decode()
    return {
        "type": "compaction",
        "id": f"cmp_{secrets.token_hex(16)}",
        "encrypted_content": HANDLE + packed,
    }


class ForgedHandleError(UsageError):
    """A compaction item that says it holds koog's handle and does not."""


def expanded(encrypted_content: object) -> str | None:
    """The summary a replayed koog handle holds (with its lead), or None for another's;
    ForgedHandleError for one that carries koog's mark but not a summary koog wrote."""
    if not isinstance(encrypted_content, str) or not encrypted_content.startswith(HANDLE):
        return None
    try:
        raw = bounded_json.loads(base64.urlsafe_b64decode(encrypted_content[len(HANDLE) :]))
    except (ValueError, binascii.Error) as exc:
        reason = str(exc) if isinstance(exc, bounded_json.TooDeepError) else "not koog's"
        raise ForgedHandleError(f"the compaction handle cannot be read ({reason})") from None
    summary = raw.get("summary") if isinstance(raw, dict) else None
    if not isinstance(summary, str):
        raise ForgedHandleError("the compaction handle holds no summary")
    return f"{LEAD}\n\n{summary}"

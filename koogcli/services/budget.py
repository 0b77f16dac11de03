"""The context budget: what a request will cost in tokens against what the model holds.

Turns and compression both need the live prompt and the size of a request; this is their
one home (turn.py and compression.py import it, not each other). Sizes are estimates
(core/tokens.py), calibrated by the session's own history; the limit is `context_tokens`
of `[models."NAME"]`, else of `[llm]`, else the size the server named when it refused a
request (learned), else unknown — and an unknown limit never triggers compression by size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from koogcli.config.schema import Settings
from koogcli.core import tokens
from koogcli.core.messages import Message, system, user
from koogcli.core.names import SessionName
from koogcli.core.tokens import Calibration
from koogcli.services.context import AppContext


def live_prompt(ctx: AppContext, override: str | None) -> list[Message]:
    text = override if override is not None else ctx.settings.llm.system_prompt
    return [system(text)] if text else []


def context_limit(ctx: AppContext, model: str) -> int | None:
    """The model's context size: configured, else the size its server named when it
    refused a request as too long (remembered per endpoint and model)."""
    configured = configured_limit(ctx.settings, model)
    if configured is not None:
        return configured
    return ctx.learned_limits.get(ctx.endpoint_key, model)


def configured_limit(settings: Settings, model: str) -> int | None:
    spec = settings.models.get(model)
    if spec is not None and spec.context_tokens is not None:
        return spec.context_tokens
    return settings.llm.context_tokens


def learn_limit(ctx: AppContext, model: str, limit: int | None) -> bool:
    """Remember the size a refusal named, when none is configured; True if it is new."""
    if limit is None or configured_limit(ctx.settings, model) is not None:
        return False
    if ctx.learned_limits.get(ctx.endpoint_key, model) == limit:
        return False
    ctx.learned_limits.put(ctx.endpoint_key, model, limit)
    return True


SUMMARY_CUT_SECONDS = 3600


def learn_summary_cut(ctx: AppContext, model: str) -> None:
    """`model` cut a summary off at its limit even when asked for fewer words."""
    import time

    ctx.learned_limits.note_summary_cut(ctx.endpoint_key, model, int(time.time()))


def summary_cut_lately(ctx: AppContext, model: str) -> int | None:
    """When `model` last cut a summary off, if within the hour: automatic compression
    does not spend the turn on another (an explicit `koog compress` still tries)."""
    import time

    when = ctx.learned_limits.summaries_cut(ctx.endpoint_key, model)
    return when if when is not None and time.time() - when < SUMMARY_CUT_SECONDS else None


def summary_model(settings: Settings, override: str | None, chat_model: str | None) -> str:
    """Who summarises: the flag, else `compression.model`, else the chat model in use."""
    return override or settings.compression.model or chat_model or settings.llm.model


@dataclass(frozen=True, slots=True)
class Size:
    """An estimated request size against the model's context (None: unknown)."""

    tokens: int
    limit: int | None
    scale: Calibration  # what scaled it, and scales the session's other counts
    model: str = ""  # whose context and calibration

    @property
    def calibrated(self) -> bool:
        return self.scale.calibrated

    def of_messages(self, messages: Sequence[Message]) -> list[int]:
        """Each message's estimated tokens, on the same scale."""
        return [self.scale.message(m) for m in messages]

    def describe(self) -> str:
        how = "" if self.calibrated else ", not yet calibrated"
        if self.limit is None:
            return f"~{self.tokens:,} tokens (context size unknown{how})"
        return f"~{self.tokens:,} of {self.limit:,} tokens ({self.tokens / self.limit:.0%}{how})"


def size_of(
    ctx: AppContext, model: str, request: Sequence[Message], history: Sequence[Message]
) -> Size:
    """The request's size, calibrated by `history`'s last answer from `model`."""
    scale = tokens.calibration(history, model)
    return Size(scale.request(request), context_limit(ctx, model), scale, model)


FITTED = "fitted to the context, no summary"


def window_to_fit(
    ctx: AppContext,
    model: str,
    history: Sequence[Message],
    tail: Sequence[Message],
    refused: int | None = None,
) -> list[Message] | None:
    """The newest of `history` (system and memory messages kept) that fit beside `tail`
    in the model's context, less the reply's room, and under three quarters of the
    estimated size of a request the server `refused` (estimates err, and a server that
    sends no usage never calibrates them): what a turn sends when no summary can be made
    (a small model that cannot stop). The stored history is not touched. None: neither
    the context size nor a refused size is known, or `tail` alone leaves no room."""
    from koogcli.core.preprocessors import TokenWindowPreprocessor

    size = size_of(ctx, model, [*history, *tail], history)
    limit = size.limit if size.limit is not None else refused  # a server that named no size
    if limit is None:
        return None
    reply = min(ctx.settings.llm.max_tokens or limit // 4, limit // 2)
    room = limit - reply
    if refused is not None:
        room = min(room, refused * 3 // 4)
    room -= size.scale.request(tail)
    if room <= 0:
        return None
    return TokenWindowPreprocessor(room, size.scale.message)(list(history))


def over_threshold(settings: Settings, size: Size) -> bool:
    """compression.auto_at: the request would pass this share of a known context."""
    auto_at = settings.compression.auto_at
    return bool(auto_at) and size.limit is not None and size.tokens > auto_at * size.limit


def session_size(
    ctx: AppContext,
    session: SessionName,
    model: str | None = None,
    system_prompt: str | None = None,
    next_message: str = "",
) -> Size:
    """The size of the session's next request as the history stands (with `next_message`
    as the user's message, if given), calibrated by its own last answer."""
    stored = ctx.history.read(session)
    model = model or _model_in_use(ctx, stored.messages)
    loaded = ctx.chat_memory.prepare(stored, live_prompt(ctx, system_prompt))
    request = [*loaded.messages, *([user(next_message)] if next_message else [])]
    return size_of(ctx, model, request, loaded.messages)


def _model_in_use(ctx: AppContext, history: Sequence[Message]) -> str:
    """The configured model; with none configured, the one the session's last reply came
    from (a local server's first model is chosen per turn, not stored in the config)."""
    if "llm.model" in ctx.config.provenance:
        return ctx.settings.llm.model
    last = next(
        (m for m in reversed(history) if m.role == "assistant" and m.meta.get("model")), None
    )
    return str(last.meta["model"]) if last is not None else ctx.settings.llm.model

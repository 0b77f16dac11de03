"""Before a turn: its request within the model's budget (SPEC §5: compression before
overflow, and recovery that fits). Over the threshold the history is compressed (and the
compression stored, with a restore point); a model that cannot summarise has the turn sent
with only the newest messages that fit, the stored history left whole."""

from __future__ import annotations

import time

from koogcli.core.chat_memory import LoadedPrompt
from koogcli.core.errors import ContextOverflowError
from koogcli.core.messages import Message
from koogcli.core.messages import user as user_message
from koogcli.core.ports import StoredHistory
from koogcli.core.results import CompressResult
from koogcli.core.why import trace
from koogcli.services import budget
from koogcli.services.context import AppContext
from koogcli.services.turn.request import TurnEvents, TurnRequest


def within_budget(
    ctx: AppContext,
    request: TurnRequest,
    model: str,
    live: list[Message],
    events: TurnEvents,
    recovering: bool,
    refused: int | None = None,
) -> tuple[LoadedPrompt, StoredHistory, bool]:
    """The history the turn starts from, compressed first when the configured limits say
    so (compression.auto_after_messages, compression.auto_at) or the server refused the
    turn as too long (`recovering`). A saved turn compresses the stored history, with a
    restore point of its own, so `rollback --latest` undoes the turn and the next rollback
    the compression; --no-save compresses the request only."""
    if request.history is not None and not request.recording.writes:
        stored = StoredHistory(list(request.history), 0)
    else:
        stored = request.known or ctx.history.read(request.session)
    whole = request.recording.for_client  # SPEC §6: preprocessors shape the request only
    loaded = ctx.chat_memory.prepare(stored, live, whole)
    if request.client is not None and not request.client.recovers:
        return loaded, stored, False  # an agent compacts by itself (SPEC §6)
    reason = (
        "the server said the request was too long"
        if recovering
        else _compress_reason(ctx, request, model, loaded)
    )
    if reason is None:
        return loaded, stored, False
    summarizer = budget.summary_model(ctx.settings, None, model)
    cut = budget.summary_cut_lately(ctx, summarizer)
    if cut is not None:
        events.warn(
            f"automatic compression skipped: {summarizer} cut off its summaries at "
            f"{time.strftime('%H:%M', time.localtime(cut))} (set [compression] model to one "
            "that can summarise, or run `koog compress`)"
        )
        fitted = _fitted(ctx, request, model, loaded, events, refused)
        return fitted or loaded, stored, False
    try:
        if request.recording.writes:
            compressed = _compress(ctx, request, model, events, reason, recovering)
            stored = ctx.history.read(request.session)
            loaded = ctx.chat_memory.prepare(stored, live, whole)
        else:
            loaded, compressed = _compress_request(ctx, model, loaded, events, reason, recovering)
    except ContextOverflowError as err:
        # Even its smallest summary requests were too long: the turn sends what fits.
        fitted = _fitted(ctx, request, model, loaded, events, refused)
        if fitted is not None:
            events.warn(
                f"{err.message.rstrip('.')}, in the summary request of the compression "
                "before the turn; the history stays as it was"
            )
            return fitted, stored, False
        raise ContextOverflowError(
            f"{err.message.rstrip('.')}, in the summary request of the compression before "
            "the turn; nothing was stored",
            hint=f"`koog compress -s {request.session.value} --strategy last-n` keeps a "
            f"summary of the last messages, or `koog rollback -s {request.session.value} "
            "--latest` undoes the last turn",
        ) from err
    limit = budget.context_limit(ctx, model)
    size = (
        _size(ctx, request, model, loaded) if limit and ctx.settings.compression.auto_at else None
    )
    too_long = size is not None and size.limit is not None and size.tokens > size.limit
    if too_long or (recovering and not compressed):  # still too long: what fits is sent
        fitted = _fitted(ctx, request, model, loaded, events, refused)
        if fitted is not None:
            return fitted, stored, compressed
    if size is not None and size.limit is not None and size.tokens > size.limit:
        kept = " (the compression is kept; `koog rollback --latest` undoes it)"
        raise ContextOverflowError(
            f"the request would still be {size.describe()} after compression; the turn was "
            f"not sent{kept if request.recording.writes else ''}",
            hint=f"run `koog compress -s {request.session.value} --strategy last-n`, or start "
            "a new session",
        )
    return loaded, stored, compressed


def _fitted(
    ctx: AppContext,
    request: TurnRequest,
    model: str,
    loaded: LoadedPrompt,
    events: TurnEvents,
    refused: int | None,
) -> LoadedPrompt | None:
    """No summary could be made: this request sends the newest messages that fit, and
    the stored history stays whole (`koog why` shows what was left out)."""
    tail = list(request.tail or (user_message(request.text),))
    kept = budget.window_to_fit(ctx, model, loaded.messages, tail, refused)
    if kept is None or len(kept) == len(loaded.messages):
        return None
    events.warn(
        f"this turn sends only the newest {len(kept)} of {len(loaded.messages)} messages (what "
        "fits the context); the stored history is unchanged"
    )
    step = trace(budget.FITTED, loaded.messages, kept)
    return LoadedPrompt(kept, loaded.revision, loaded.base, (*loaded.trace, step))


def _size(ctx: AppContext, request: TurnRequest, model: str, loaded: LoadedPrompt) -> budget.Size:
    return budget.size_of(
        ctx,
        model,
        [*loaded.messages, *(request.tail or (user_message(request.text),))],
        loaded.messages,
    )


def _compress_reason(
    ctx: AppContext, request: TurnRequest, model: str, loaded: LoadedPrompt
) -> str | None:
    settings = ctx.settings.compression
    count = sum(1 for m in loaded.messages if m.role != "system")
    if not count:
        return None
    if settings.auto_after_messages and count > settings.auto_after_messages:
        return f"{count} messages, over compression.auto_after_messages = {settings.auto_after_messages}"
    if not settings.auto_at or budget.context_limit(ctx, model) is None:
        return None  # counting tokens costs time in proportion to the history: only if used
    size = _size(ctx, request, model, loaded)
    if budget.over_threshold(ctx.settings, size):
        return f"the request would be {size.describe()}, over compression.auto_at = {settings.auto_at:g}"
    return None


FALLBACK_STRATEGY = "last-n"


def _compress(
    ctx: AppContext,
    request: TurnRequest,
    model: str,
    events: TurnEvents,
    reason: str,
    recovering: bool,
) -> bool:
    """Compress the stored history; False when it could not be and the turn goes on."""
    from koogcli.services import compression, summarizer  # only when it runs (import cost)

    def run(choice: compression.StrategyChoice) -> CompressResult:
        return compression.compress(
            ctx,
            compression.CompressRequest(
                request.session, choice, chat_model=model, system_prompt=request.system_prompt
            ),
        )

    try:
        done = run(compression.StrategyChoice())
    except summarizer.NoSummaryError as err:
        _no_summary(ctx, model, err, events)
        return False
    except compression.CompressionGrewError as err:
        # The configured strategy would lengthen the history: the next one, which keeps
        # only a summary of the last messages; if that grows too, the turn goes uncompressed.
        events.warn(f"{err.message}; trying --strategy {FALLBACK_STRATEGY}")
        try:
            done = run(compression.StrategyChoice(strategy=FALLBACK_STRATEGY))
        except summarizer.NoSummaryError as again:
            _no_summary(ctx, model, again, events)
            return False
        except compression.CompressionGrewError as again:
            events.warn(f"{again.message}; the turn goes on uncompressed")
            return False
    for problem in done.problems:
        events.warn(problem)
    if events.on_note:
        what = f"{len(done.before)} → {len(done.after)} messages" if done.changed else "no change"
        events.on_note(f"compressed the history ({done.strategy}, {what}): {reason}")
    return done.changed


def _no_summary(ctx: AppContext, model: str, err: Exception, events: TurnEvents) -> None:
    """A summary that is none (SPEC §5.19): remembered when the model cut it off, so the
    next automatic compressions do not ask again (budget.summary_cut_lately). The turn goes
    on, fitted to the context where it does not fit: a summary koog could not make is no
    reason to refuse the person's turn."""
    if getattr(err, "cut_off", False):
        budget.learn_summary_cut(ctx, budget.summary_model(ctx.settings, None, model))
    events.warn(f"{err}; the turn goes on uncompressed")


def _compress_request(
    ctx: AppContext,
    model: str,
    loaded: LoadedPrompt,
    events: TurnEvents,
    reason: str,
    recovering: bool,
) -> tuple[LoadedPrompt, bool]:
    from koogcli.services import compression, summarizer

    settings = ctx.settings.compression
    try:
        done = compression.compress_prompt(
            ctx,
            loaded.messages,
            compression.build_strategy(settings),
            settings.preserve_memory,
            model=budget.summary_model(ctx.settings, None, model),
        )
    except summarizer.NoSummaryError as err:
        _no_summary(ctx, model, err, events)
        return loaded, False
    except compression.CompressionGrewError as err:
        events.warn(f"{err.message}; the turn goes on uncompressed")
        return loaded, False
    if done.messages is None:
        return loaded, False
    if events.on_note:
        events.on_note(
            f"compressed this request's history ({done.strategy}, "
            f"{len(loaded.messages)} → {len(done.messages)} messages): {reason}"
        )
    return LoadedPrompt(done.messages, loaded.revision), True

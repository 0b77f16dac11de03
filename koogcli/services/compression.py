"""`koog compress`: build a strategy, summarise concurrently, store as a turn would.

A restore point is taken before the compressed history is written, so `koog rollback
--latest` undoes it; `dry_run` writes nothing at all. Any failed request aborts the whole
compression and leaves the history byte-identical.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from koogcli.config.schema import CompressionSettings
from koogcli.core import compression as core
from koogcli.core import wire_marks
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.errors import (
    ConflictError,
    ContextOverflowError,
    ModelError,
    StorageError,
    UsageError,
)
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.core.ports import StoredHistory
from koogcli.core.results import CompressResult
from koogcli.core.summary_in_parts import InParts
from koogcli.core.tokens import carry, request_tokens
from koogcli.services.budget import (
    context_limit,
    learn_limit,
    live_prompt,
    summary_model,
)
from koogcli.services.checkpoints import restore_point
from koogcli.services.context import AppContext
from koogcli.services.summarizer import ModelSummarizer, NoSummaryError, instructed

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class StrategyChoice:
    """Flags that override `[compression]` for one run; None (or empty) keeps the config."""

    strategy: str | None = None
    last_n: int | None = None
    since: str | None = None
    chunk_size: int | None = None
    concepts: tuple[str, ...] = ()
    fallback: str | None = None


@dataclass(frozen=True)
class CompressRequest:
    session: SessionName
    choice: StrategyChoice = field(default_factory=lambda: StrategyChoice())
    preserve_memory: bool | None = None
    dry_run: bool = False
    model: str | None = None  # who summarises (-m); None: compression.model, else chat_model
    chat_model: str | None = None  # the model in use (the REPL's /model); None: llm.model
    system_prompt: str | None = None  # the live system prompt; None: llm.system_prompt


def build_strategy(
    settings: CompressionSettings, choice: StrategyChoice = StrategyChoice()
) -> core.Strategy:
    return _strategy(choice.strategy or settings.strategy, settings, choice, allow_fallback=True)


def _strategy(
    name: str, settings: CompressionSettings, request: StrategyChoice, allow_fallback: bool
) -> core.Strategy:
    if name == "whole":
        return core.WholeHistory()
    if name == "per-system":
        return core.WholeHistoryPerSystemMessage()
    if name == "last-n":
        return core.FromLastNMessages(request.last_n or settings.last_n)
    if name == "chunked":
        return core.Chunked(request.chunk_size or settings.chunk_size)
    if name == "since":
        text = request.since or settings.since
        if not text:
            raise UsageError(
                "strategy 'since' needs a time", hint="pass --since 2026-11-29T10:00:00Z"
            )
        try:
            since = datetime.fromisoformat(text)
        except ValueError as exc:
            raise UsageError(f"--since {text!r} is not an ISO-8601 time") from exc
        return core.FromTimestamp(since if since.tzinfo else since.replace(tzinfo=UTC))
    if name == "facts":
        concepts = tuple(core.Concept.parse(c) for c in (request.concepts or settings.concepts))
        if not concepts:
            raise UsageError(
                "strategy 'facts' needs concepts",
                hint="pass --concept NAME:DESCRIPTION[:single|multiple]",
            )
        fallback_name = request.fallback if request.fallback is not None else settings.fallback
        fallback = None
        if fallback_name and allow_fallback:
            if fallback_name == "facts":
                raise UsageError("the fallback of 'facts' cannot be 'facts'")
            fallback = _strategy(fallback_name, settings, request, allow_fallback=False)
        return core.FactRetrieval(concepts, fallback)
    raise UsageError(
        f"unknown strategy {name!r}", hint="use whole, last-n, since, chunked, facts or per-system"
    )


@dataclass(frozen=True)
class Compressed:
    messages: list[Message] | None  # None: the strategy left the history as it was
    requests: int
    problems: tuple[str, ...]
    strategy: str


def compress_prompt(
    ctx: AppContext,
    prompt: Sequence[Message],
    strategy: core.Strategy,
    preserve_memory: bool,
    progress: Progress | None = None,
    model: str | None = None,
    must_shrink: bool = True,
) -> Compressed:
    """Run `strategy` over `prompt`; a strategy whose one summary request would not fit
    the summarising model's context is run in chunks that do. `must_shrink=False`: a
    summary no shorter than what it replaces is kept (an agent asked for it)."""
    summarizer = ModelSummarizer(ctx, ctx.settings.compression.concurrency, progress, model)
    memory = core.memory_messages(prompt, preserve_memory)
    for attempt, share in enumerate(_SHARES):
        planned = fitted(strategy, prompt, context_limit(ctx, summarizer.model), share)
        try:
            out = planned.compress(list(prompt), memory, summarizer)
            break
        except ContextOverflowError as err:
            # The summary request itself was too long: plan again with the size the
            # server said (learned), in smaller chunks, while there is a smaller share.
            learned = learn_limit(ctx, summarizer.model, err.limit)
            known = context_limit(ctx, summarizer.model) is not None
            if attempt == len(_SHARES) - 1 or not (learned or known):
                raise
        except NoSummaryError as err:
            # Cut off at the room a small context leaves: smaller chunks leave more room
            # and ask for less; without a known context there is nothing to make smaller.
            if not err.cut_off or attempt == len(_SHARES) - 1:
                raise
            if context_limit(ctx, summarizer.model) is None:
                raise
    strategy = planned
    if out is not None:
        if must_shrink:
            _shrinks(prompt, out, strategy.name)
        out = carry(prompt, out)  # the session stays calibrated once its answers are gone
        before = {m.id for m in prompt}
        out = [  # which strategy wrote each new summary (`koog why` says so)
            replace(m, meta={**m.meta, "strategy": strategy.name})
            if m.id not in before and m.meta.get("kind") in ("summary", "facts")
            else m
            for m in out
        ]
    return Compressed(out, summarizer.requests, tuple(summarizer.problems), strategy.name)


def _compressed_already(prompt: Sequence[Message]) -> bool:
    """The history is a summary and what compression always keeps, nothing after it."""
    last = max(
        (i for i, m in enumerate(prompt) if m.meta.get("kind") in ("summary", "facts")),
        default=None,
    )
    if last is None:
        return False
    return not any(wire_marks.conversational(m) for m in prompt[last + 1 :])


class CompressionGrewError(ModelError):
    """The summaries came out longer than what they replace: applying them would defeat
    compression's purpose, so nothing changes (a small model repeating its input does it)."""


def _shrinks(prompt: Sequence[Message], out: Sequence[Message], strategy: str) -> None:
    before, after = request_tokens(prompt), request_tokens(out)
    if after >= before:
        raise CompressionGrewError(
            f"the {strategy} compression would make the history longer (~{before:,} → "
            f"~{after:,} tokens); nothing was changed",
            hint="the model wrote summaries longer than the conversation; try --strategy "
            "last-n, or a stronger model with -m",
        )


def fitted(
    strategy: core.Strategy, prompt: Sequence[Message], limit: int | None, share: float = 0.5
) -> core.Strategy:
    """When one summary request of the whole history would not leave the summary room (a
    quarter of the context at most) in the summarising model's context, `whole` is made
    in parts that fit (core/summary_in_parts.py) and `per-system` becomes `chunked`, each
    part about `share` of it (the estimate is a server's count only roughly: a smaller
    share when the server still refused); chunks asked for are made smaller to fit."""
    if limit is None or strategy.name not in ("whole", "per-system", "chunked"):
        return strategy
    answer_room = min(1024, limit // 4)
    whole = strategy.name != "chunked"
    if whole and request_tokens(core.summary_prompt(prompt)) <= (limit - answer_room) * share * 2:
        return strategy
    if strategy.name == "whole":  # one summary still, made in parts that fit
        instruction = request_tokens(instructed(core.summary_prompt([]), limit))
        return InParts(max(32, int((limit - answer_room) * share * 2) - instruction))
    per_message = request_tokens(prompt) / max(1, len(prompt))
    fits = max(1, int(limit * share / per_message))
    if not whole and getattr(strategy, "size", fits) <= fits:
        return strategy  # chunks asked for that fit already
    return core.Chunked(fits)


_SHARES = (0.5, 0.25, 0.1)  # of the context, for a chunk, in turn while the server refuses


def compress(
    ctx: AppContext, request: CompressRequest, progress: Progress | None = None
) -> CompressResult:
    settings = ctx.settings.compression
    strategy = build_strategy(settings, request.choice)
    ctx.require_session(request.session)
    stored = ctx.history.read(request.session)
    if not stored.messages:
        raise UsageError(f"session {request.session.value} has no history to compress")
    prompt = ctx.chat_memory.prepare(stored, live_prompt(ctx, request.system_prompt)).messages
    preserve = (
        settings.preserve_memory if request.preserve_memory is None else request.preserve_memory
    )
    model = summary_model(ctx.settings, request.model, request.chat_model)
    if _compressed_already(prompt):
        # Nothing came after the last summary: summarising it again could only make it
        # longer (and costs a request); nothing changes.
        return CompressResult(
            request.session.value,
            strategy.name,
            list(stored.messages),
            list(stored.messages),
            0,
            None,
            False,
            request.dry_run,
            ("nothing was added since the last summary",),
        )
    done = compress_prompt(ctx, prompt, strategy, preserve, progress, model)
    compressed, requests = done.messages, done.requests
    after = ctx.pipeline(compressed) if compressed is not None else list(stored.messages)
    result = CompressResult(
        request.session.value,
        done.strategy,
        list(stored.messages),
        after,
        requests,
        None,
        compressed is not None,
        request.dry_run,
        done.problems,
    )
    if request.dry_run or compressed is None:
        return result
    after, undo = _store(ctx, request.session, stored, compressed, after)
    return CompressResult(
        result.session,
        result.strategy,
        result.before,
        after,
        requests,
        undo.id if undo else None,
        True,
        False,
        done.problems,
    )


STORE_ATTEMPTS = 100


def _store(
    ctx: AppContext,
    session: SessionName,
    stored: StoredHistory,
    compressed: list[Message],
    after: list[Message],
) -> tuple[list[Message], Checkpoint | None]:
    """Store the compressed history. Turns that were stored while the summary was being
    written are kept: re-applied on top of it, as a turn re-applies itself on a conflict,
    so compression never starves under writers and never loses a turn. A restore point of
    the history it replaces is taken at each attempt (`rollback --latest` undoes it)."""
    current = stored
    for _ in range(STORE_ATTEMPTS):
        added = _appended_since(stored.messages, current.messages)
        if added is None:
            raise StorageError(
                f"session {session.value} was changed during compression by more than new "
                "turns (a rollback, clear, import or another compression); nothing was stored",
                hint="run `koog compress` again",
            )
        final = ctx.pipeline([*compressed, *added]) if added else after
        undo = restore_point(
            ctx, session, "compress", messages=current.messages, revision=current.revision
        )
        try:
            ctx.history.write(session, final, expected_revision=current.revision)
            return final, undo
        except ConflictError:
            if undo is not None:
                ctx.checkpoints.delete(session, undo.id)
            current = ctx.history.read(session)
    raise StorageError(
        f"session {session.value} kept changing during compression ({STORE_ATTEMPTS} "
        "attempts); nothing was stored",
        hint="run `koog compress` again when fewer turns are running",
    )


def _appended_since(before: Sequence[Message], now: Sequence[Message]) -> list[Message] | None:
    """The messages `now` holds after the last of `before` (turns stored since; a window may
    have dropped messages from the front meanwhile), or None when `now` is not `before`
    with turns added."""
    if len(now) == len(before) and all(a is b or a == b for a, b in zip(now, before, strict=True)):
        return []
    if not before:
        return list(now)
    last = before[-1]
    at = next((i for i in range(len(now) - 1, -1, -1) if now[i].id == last.id), None)
    if at is None or now[at] != last:
        return None
    return list(now[at + 1 :])

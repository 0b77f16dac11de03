"""`koog compress`: build a strategy, summarise concurrently, store as a turn would.

A restore point is taken before the compressed history is written, so `koog rollback
--latest` undoes it; `dry_run` writes nothing at all. Any failed request aborts the whole
compression and leaves the history byte-identical.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime

from koogcli.config.schema import CompressionSettings
from koogcli.core import compression as core
from koogcli.core.errors import ConflictError, StorageError, UsageError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.core.ports import ModelRequest
from koogcli.services.checkpoints import restore_point
from koogcli.services.context import AppContext

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
    model: str | None = None  # the model that summarises; None: llm.model


@dataclass(frozen=True)
class CompressResult:
    session: str
    strategy: str
    before: list[Message]
    after: list[Message]
    requests: int
    checkpoint: str | None
    changed: bool
    dry_run: bool


class ModelSummarizer:
    """Sends summary requests through the chat model, `concurrency` at a time, in order."""

    def __init__(
        self,
        ctx: AppContext,
        concurrency: int,
        progress: Progress | None = None,
        model: str | None = None,
    ) -> None:
        self.ctx = ctx
        self.model = model or ctx.settings.llm.model
        self.concurrency = concurrency
        self.progress = progress
        self.requests = 0
        self._lock = threading.Lock()

    def _one(self, prompt: Sequence[Message]) -> str:
        llm = self.ctx.settings.llm
        request = ModelRequest(self.model, list(prompt), llm.temperature, stream=False)
        with self._lock:
            self.requests += 1
        return self.ctx.model().complete(request).text

    def ask_all(self, prompts: Sequence[Sequence[Message]]) -> list[str]:
        total = len(prompts)
        if self.progress:
            self.progress(0, total)
        pool = ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, total)))
        futures: list[Future[str]] = [pool.submit(self._one, p) for p in prompts]
        try:
            done_count = 0
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for future in done:
                    future.result()  # raises the first failure: the compression is aborted
                done_count += len(done)
                if self.progress:
                    self.progress(done_count, total)
            return [f.result() for f in futures]
        finally:
            pool.shutdown(wait=False, cancel_futures=True)


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


def compress_prompt(
    ctx: AppContext,
    prompt: Sequence[Message],
    strategy: core.Strategy,
    preserve_memory: bool,
    progress: Progress | None = None,
    model: str | None = None,
) -> tuple[list[Message] | None, int]:
    """The compressed prompt (None: unchanged) and the number of requests made."""
    summarizer = ModelSummarizer(ctx, ctx.settings.compression.concurrency, progress, model)
    memory = core.memory_messages(prompt, preserve_memory)
    return strategy.compress(list(prompt), memory, summarizer), summarizer.requests


def compress(
    ctx: AppContext, request: CompressRequest, progress: Progress | None = None
) -> CompressResult:
    from koogcli.services.turn import live_prompt

    settings = ctx.settings.compression
    strategy = build_strategy(settings, request.choice)
    ctx.require_session(request.session)
    stored = ctx.history.read(request.session)
    if not stored.messages:
        raise UsageError(f"session {request.session.value} has no history to compress")
    prompt = ctx.memory.prepare(stored, live_prompt(ctx, None)).messages
    preserve = (
        settings.preserve_memory if request.preserve_memory is None else request.preserve_memory
    )
    compressed, requests = compress_prompt(ctx, prompt, strategy, preserve, progress, request.model)
    after = ctx.pipeline(compressed) if compressed is not None else list(stored.messages)
    result = CompressResult(
        request.session.value,
        strategy.name,
        list(stored.messages),
        after,
        requests,
        None,
        compressed is not None,
        request.dry_run,
    )
    if request.dry_run or compressed is None:
        return result
    undo = restore_point(
        ctx, request.session, "compress", messages=stored.messages, revision=stored.revision
    )
    try:
        ctx.history.write(request.session, after, expected_revision=stored.revision)
    except ConflictError as exc:
        raise StorageError(
            f"session {request.session.value} changed during compression; nothing was stored",
            hint="run `koog compress` again",
        ) from exc
    return CompressResult(
        result.session,
        result.strategy,
        result.before,
        after,
        requests,
        undo.id if undo else None,
        True,
        False,
    )

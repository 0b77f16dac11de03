"""Long-term memory actions: add, search, list, delete, ingest, recall, and the retrieval and
ingestion steps of a turn. No printing, no exits."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from koogcli.core import memory as core
from koogcli.core import memory_placement as placement
from koogcli.core.errors import KoogError, UsageError
from koogcli.core.memory import MemoryQuery, MemoryRecord, Mode, SearchHit
from koogcli.core.messages import Message
from koogcli.core.names import SessionName
from koogcli.services.checkpoints import restore_point
from koogcli.services.context import AppContext

_NAMESPACE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")


def namespace_of(raw: str | None, default: str = "default") -> str:
    name = default if raw is None else raw
    if not _NAMESPACE.fullmatch(name):
        raise UsageError(
            f"invalid namespace {name!r}",
            hint="use 1-64 letters, digits, '.', '_' or '-', not starting with '.' or '-'",
        )
    return name


def _embedding_model(ctx: AppContext) -> str:
    return ctx.settings.long_term_memory.embeddings.model


def _embed(ctx: AppContext, texts: list[str]) -> list[list[float]]:
    """Vectors checked before anything is written (finite, the stored dimension)."""
    model = _embedding_model(ctx)
    vectors = ctx.embedder().embed(texts)
    core.check_vectors(vectors, model, len(texts), ctx.long_term_memory.vector_dimension(model))
    return vectors


def _store(ctx: AppContext, records: Sequence[MemoryRecord]) -> list[str]:
    """Embed first (when configured), then write records and vectors in one transaction, so
    a failing embeddings endpoint leaves nothing half-written. What is written passes the
    redact preprocessors, like everything koog writes."""
    records = [r.with_content(ctx.pipeline.redacts(r.content)) for r in records]
    model = _embedding_model(ctx)
    if not model or not records:
        return ctx.long_term_memory.add(records)
    vectors = _embed(ctx, [r.content for r in records])
    return ctx.long_term_memory.add(records, vectors, model)


def add(
    ctx: AppContext,
    text: str,
    namespace: str | None = None,
    metadata: Mapping[str, object] | None = None,
) -> MemoryRecord:
    if not text.strip():
        raise UsageError("nothing to remember: the text is empty")
    record = MemoryRecord(text, namespace_of(namespace), metadata=dict(metadata or {}))
    _store(ctx, [record])
    return record


MODES = ("auto", "fulltext", "embedding", "hybrid", "jaccard", "keyword", "similarity")


def resolve_mode(ctx: AppContext, mode: str | None) -> Mode:
    """The search actually run. `auto`: hybrid with an embedding model, else full-text;
    `similarity` (the name before version 2): embedding with a model, else Jaccard."""
    chosen = mode or ctx.settings.long_term_memory.retrieval.mode
    if chosen not in MODES:
        raise UsageError(f"unknown search mode {chosen!r}", hint=f"use one of {', '.join(MODES)}")
    model = _embedding_model(ctx)
    if chosen == "auto":
        return "hybrid" if model else "fulltext"
    if chosen == "similarity":
        return "embedding" if model else "jaccard"
    ran = _RUN[chosen]
    if chosen in ("embedding", "hybrid") and not model:
        raise UsageError(
            f"search mode {chosen!r} needs an embedding model",
            hint="set long_term_memory.embeddings.model, or use --mode fulltext",
        )
    if chosen in ("embedding", "hybrid") and not ctx.long_term_memory.vectors_supported():
        return "fulltext"
    return ran


_RUN: dict[str, Mode] = {m: m for m in ("keyword", "jaccard", "fulltext", "embedding", "hybrid")}


def search(
    ctx: AppContext,
    query: str,
    namespace: str | None = None,
    top_k: int = 10,
    threshold: float = 0.0,
    mode: str | None = None,
    where: Mapping[str, str] | None = None,
    all_namespaces: bool = False,
) -> list[SearchHit]:
    """Hits, best first, in `namespace` (default: the retrieval namespace) or everywhere."""
    store = ctx.long_term_memory
    spaces = None if all_namespaces else namespace_of(namespace, default_namespace(ctx))
    chosen = resolve_mode(ctx, mode)
    asked = MemoryQuery(chosen, query, spaces, top_k, threshold, where)
    if chosen in ("keyword", "jaccard", "fulltext"):
        return store.search(asked)
    model = _embedding_model(ctx)
    if not query.strip():
        return []
    for ns in store.namespaces() if spaces is None else [spaces]:
        missing = store.without_vectors(ns, model)
        if missing:  # records added before embeddings were configured: embed them once
            vectors = _embed(ctx, [r.content for r in missing])
            store.put_vectors(model, [(r.id, v) for r, v in zip(missing, vectors, strict=True)])
    if not store.vector_count(model):
        return []
    [vector] = _embed(ctx, [query])
    floor = ctx.settings.long_term_memory.embeddings.min_similarity  # §5.16
    return store.search(replace(asked, vector=vector, model=model, floor=floor))


def parse_where(pairs: Sequence[str]) -> dict[str, str]:
    """`--where KEY=VALUE`, repeatable: every pair must hold."""
    where: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--where {pair!r} is not KEY=VALUE", hint="e.g. --where team=infra")
        if key.strip() in where:
            raise UsageError(f"--where names {key.strip()!r} twice; give one value per key")
        where[key.strip()] = value
    return where


def default_namespace(ctx: AppContext) -> str:
    """`memory search` and `memory list` look where retrieval looks, unless told otherwise."""
    return ctx.settings.long_term_memory.retrieval.namespace


def list_(
    ctx: AppContext,
    namespace: str | None = None,
    all_namespaces: bool = False,
    where: Mapping[str, str] | None = None,
) -> list[MemoryRecord]:
    spaces = None if all_namespaces else namespace_of(namespace, default_namespace(ctx))
    return ctx.long_term_memory.records(spaces, where)


MIN_ID_PREFIX = 6


def resolve_id(ctx: AppContext, wanted: str) -> str:
    """A record id from any unique prefix of 6 or more characters (what `list` shows)."""
    if len(wanted) < MIN_ID_PREFIX:
        raise UsageError(
            f"record id {wanted!r} is too short",
            hint=f"give at least {MIN_ID_PREFIX} characters of an id from `koog memory list`",
        )
    found = ctx.long_term_memory.ids_starting(wanted)
    if not found:
        raise UsageError(f"no memory record {wanted!r}", hint="`koog memory list` shows the ids")
    if len(found) > 1 and wanted not in found:
        raise UsageError(
            f"record id {wanted!r} is ambiguous: {', '.join(found[:5])}",
            hint="give more characters",
        )
    return wanted if wanted in found else found[0]


def show(ctx: AppContext, wanted: str) -> MemoryRecord:
    record = ctx.long_term_memory.get(resolve_id(ctx, wanted))
    if record is None:
        raise UsageError(f"no memory record {wanted!r}")
    return record


def delete(ctx: AppContext, record_id: str) -> None:
    if not ctx.long_term_memory.delete(resolve_id(ctx, record_id)):
        raise UsageError(f"no memory record {record_id!r}", hint="`koog memory list` shows the ids")


def forgettable(
    ctx: AppContext,
    ids: Sequence[str] = (),
    where: Mapping[str, str] | None = None,
    session: str | None = None,
) -> list[MemoryRecord]:
    """The records `memory forget` names, in every namespace: by id (6+ characters of
    one), and those whose metadata has every `where` pair and that came from `session`."""
    if not ids and not where and session is None:
        raise UsageError(
            "name the records to forget", hint="give ids, --where KEY=VALUE or --session NAME"
        )
    chosen = {record.id: record for record in map(lambda i: show(ctx, i), ids)}
    if where or session is not None:
        for record in ctx.long_term_memory.records(None, where or None):
            if session is None or origin(record)[0] == session:
                chosen.setdefault(record.id, record)
    return list(chosen.values())


def forget(ctx: AppContext, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
    """Gone for good (SPEC §5.17): from the store and every index, and ingestion of the
    messages they came from adds nothing again."""
    return ctx.long_term_memory.forget([r.id for r in records])


def origin(record: MemoryRecord) -> tuple[str | None, str | None]:
    """The session and message id a record was ingested from (None, None if added)."""
    if not record.source:
        return None, None
    session, _, message = record.source.partition("/")
    return session, message or None


@dataclass(frozen=True)
class IngestResult:
    namespace: str
    added: int
    skipped: int


def ingest_messages(
    ctx: AppContext,
    session: SessionName,
    messages: Sequence[Message],
    namespace: str,
    roles: Sequence[str],
) -> IngestResult:
    """Records for messages not ingested before (each message's source key is unique)."""
    records = core.records_from_messages(messages, roles, namespace, session.value)
    texts = [core.content_key(r.content) for r in records]  # each digest computed once
    keys = [r.source for r in records if r.source] + texts
    known = ctx.long_term_memory.known_sources(namespace, keys)
    # Never twice from one message, and never again a text that was forgotten (§5.19).
    fresh = [
        r
        for r, text in zip(records, texts, strict=True)
        if r.source not in known and text not in known
    ]
    added = _store(ctx, fresh)
    return IngestResult(namespace, len(added), len(records) - len(added))


def ingest_session(
    ctx: AppContext, session: SessionName, namespace: str | None = None, roles: Sequence[str] = ()
) -> IngestResult:
    ctx.require_session(session)
    settings = ctx.settings.long_term_memory.ingestion
    pending = ctx.pending_ingestion.load(session)
    present = {m.id for m in pending}
    messages = [*pending, *(m for m in ctx.history.read(session).messages if m.id not in present)]
    done = ingest_messages(
        ctx,
        session,
        messages,
        namespace_of(namespace, settings.namespace),
        list(roles) or settings.roles,
    )
    if pending:
        ctx.pending_ingestion.clear(session)
    return done


def ingest_turn(
    ctx: AppContext, session: SessionName, added: Sequence[Message]
) -> IngestResult | None:
    """The ingest step of a turn; None when ingestion is off. Messages an earlier failure
    left pending go first; on failure this turn's join them (§5.12), and source keys make
    every message a record at most once."""
    settings = ctx.settings.long_term_memory.ingestion
    if not settings.enabled:
        return None
    pending = ctx.pending_ingestion.load(session)
    known = {m.id for m in pending}
    messages = [*pending, *(m for m in added if m.id not in known)]
    try:
        done = ingest_messages(ctx, session, messages, settings.namespace, settings.roles)
    except (KoogError, KeyboardInterrupt):
        ctx.pending_ingestion.save(session, messages)
        raise
    if pending:
        ctx.pending_ingestion.clear(session)
    return done


@dataclass(frozen=True)
class Retrieval:
    messages: list[Message]  # the request's messages, augmented when anything was found
    hits: list[SearchHit]  # the records placed for the question this request answers
    # `after`: the question, first sent in this turn, with its records recorded on it (the
    # turn stores it so; later requests place the same records in the same place).
    marked: Message | None = None
    # `after`: the search for the new question failed; earlier questions keep their records.
    problem: KoogError | None = None
    # `after`: records this request carries after earlier questions (`koog why` counts them).
    earlier: int = 0
    # Every record this request carries, by the id of the question it follows (this
    # question's too): what `koog why` names.
    carried: Mapping[str, Sequence[SearchHit]] = field(default_factory=dict)


def retrieve(
    ctx: AppContext, messages: Sequence[Message], fresh: Collection[str] = (), search: bool = True
) -> Retrieval | None:
    """The retrieve step before a model request; None when retrieval is off. `fresh`: the
    ids of the messages this turn adds (only those can still take records with `after`);
    `search`: False once a search of this turn failed (`after` still places earlier
    questions' records, so the request keeps its start)."""
    settings = ctx.settings.long_term_memory.retrieval
    if not settings.enabled:
        return None
    if settings.augmenter == "after":
        return _placed_after(ctx, messages, fresh if search else ())
    if not search:
        return None
    hits = _search_for(ctx, messages)
    return Retrieval(core.augment(messages, hits, settings.augmenter), hits)


def _search_for(ctx: AppContext, messages: Sequence[Message]) -> list[SearchHit]:
    settings = ctx.settings.long_term_memory.retrieval
    query = core.query_from(messages, settings.query)
    if query is None:
        return []
    return search(
        ctx,
        query,
        settings.namespace,
        settings.top_k,
        settings.threshold,
        settings.mode,
        settings.where,
    )


def _expanded(
    ctx: AppContext, messages: Sequence[Message]
) -> tuple[list[Message], dict[str, list[SearchHit]]]:
    """Only records of the namespace retrieval searches now (a server token's own): a
    record placed under another namespace, or another token, never reaches this request."""
    settings = ctx.settings.long_term_memory.retrieval
    if not settings.enabled or settings.augmenter != "after":
        return list(messages), {}

    def lookup(ids: Sequence[str]) -> dict[str, MemoryRecord]:
        found = ctx.long_term_memory.get_many(ids)
        return {i: r for i, r in found.items() if r.namespace == settings.namespace}

    return placement.expanded(messages, lookup)


def _remembered(ctx: AppContext, messages: Sequence[Message]) -> list[Message]:
    """The messages with the placements remembered by their digests: a question that
    carries none of its own (a request not stored, a copy of it) gets the records it was
    sent with before, wherever it was sent."""
    unmarked = {
        i: placement.digest(m)
        for i, m in enumerate(messages)
        if m.role == "user" and not _pinned(m) and placement.KEY not in m.meta
    }
    if not unmarked:
        return list(messages)
    namespace = ctx.settings.long_term_memory.retrieval.namespace
    known = ctx.long_term_memory.placements(namespace, list(unmarked.values()))
    out = list(messages)
    for i, key in unmarked.items():
        if key in known:
            out[i] = placement.with_entries(out[i], known[key])
    return out


def _remember(ctx: AppContext, question: Message, hits: Sequence[SearchHit]) -> None:
    """The records placed after a question, by its digest; a failure to remember them
    costs only the cache of a later request that is not stored."""
    if not hits:
        return
    namespace = ctx.settings.long_term_memory.retrieval.namespace
    with contextlib.suppress(KoogError):
        ctx.long_term_memory.place(namespace, placement.digest(question), placement.entries(hits))


def _placed_after(
    ctx: AppContext, messages: Sequence[Message], fresh: Collection[str]
) -> Retrieval:
    """SPEC §5 4a: earlier questions' records where they were put; the newest question,
    when this turn sends it first, searched for and marked (core/memory_placement.py)."""
    given, messages = messages, _remembered(ctx, messages)
    out, placed_hits = _expanded(ctx, messages)
    question = next(
        (i for i in range(len(out) - 1, -1, -1) if out[i].role == "user" and not _pinned(out[i])),
        None,
    )
    if question is None:
        return Retrieval(out, [], earlier=sum(map(len, placed_hits.values())), carried=placed_hits)
    original = messages[question]
    mine = placed_hits.get(original.id, [])
    earlier = sum(map(len, placed_hits.values())) - len(mine)
    if original.id in placed_hits or placement.KEY in original.meta:
        # A new question sent before elsewhere (remembered by its digest): stored with them.
        again = original.id in fresh and placement.KEY not in given[question].meta
        marked = placement.marked(given[question], mine) if again else None
        return Retrieval(out, mine, marked, earlier=earlier, carried=placed_hits)
    if original.id not in fresh:  # asked before retrieval was on: its request stays as sent
        return Retrieval(out, [], earlier=earlier, carried=placed_hits)
    try:
        hits = _search_for(ctx, messages)
    except KoogError as err:  # the question goes without; the others keep their records
        return Retrieval(out, [], problem=err, earlier=earlier, carried=placed_hits)
    marked = placement.marked(original, hits)
    _remember(ctx, original, hits)
    out[question] = placement.with_context(original, placement.context_text(hits))
    carried = {**placed_hits, original.id: hits} if hits else placed_hits
    return Retrieval(out, hits, marked, earlier=earlier, carried=carried)


def _pinned(m: Message) -> bool:
    """koog's own notes and recalled memory: never a question."""
    return m.meta.get("kind") in ("memory", "note")


@dataclass(frozen=True)
class RecallResult:
    hits: list[SearchHit]
    message: Message | None
    checkpoint: str | None


def recall(
    ctx: AppContext, session: SessionName, query: str, namespace: str | None = None, top_k: int = 5
) -> RecallResult:
    """Pin the hits into the session as one memory message (compression preserves it)."""
    if not query.strip():
        raise UsageError("nothing to recall: the query is empty")
    ctx.require_session(session)
    hits = search(ctx, query, namespace, top_k)
    if not hits:
        return RecallResult([], None, None)
    stored = ctx.history.read(session)
    undo = restore_point(ctx, session, "recall", messages=stored.messages, revision=stored.revision)
    pinned = core.recall_message(query, hits)
    ctx.history.write(session, [*stored.messages, pinned], expected_revision=stored.revision)
    return RecallResult(hits, pinned, undo.id if undo else None)

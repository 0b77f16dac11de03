"""`koog memory add|search|list|show|delete|forget|ingest|recall`."""

from __future__ import annotations

import typer

from koogcli.cli.confirm import confirm_destructive
from koogcli.cli.options import complete_namespaces, globals_of, session_option
from koogcli.core.errors import UsageError
from koogcli.core.messages import local_time
from koogcli.ui import render, views

app = typer.Typer(
    help="Long-term memory: records searchable across sessions.", no_args_is_help=True
)

NAMESPACE = typer.Option(
    None,
    "--namespace",
    "-n",
    metavar="NS",
    help="Namespace (default: default).",
    autocompletion=complete_namespaces,
)
JSON = typer.Option(False, "--json", help="Print JSON.")
ALL_NAMESPACES = typer.Option(False, "--all-namespaces", help="Every namespace.")
WHERE = typer.Option(
    [], "--where", metavar="KEY=VALUE", help="Only records whose metadata has it (repeatable)."
)


def _meta(pairs: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--meta {pair!r} is not KEY=VALUE")
        out[key.strip()] = value
    return out


@app.command()
def add(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="What to remember."),
    namespace: str | None = NAMESPACE,
    meta: list[str] = typer.Option(
        [], "--meta", metavar="KEY=VALUE", help="KEY=VALUE metadata, repeatable."
    ),
    as_json: bool = JSON,
) -> None:
    """Remember a piece of text."""
    from koogcli.services import memory

    record = memory.add(globals_of(ctx).build(), text, namespace, _meta(meta))
    if as_json:
        render.json_out(views.record_dict(record))
    else:
        render.out(record.id)


@app.command()
def search(
    ctx: typer.Context,
    query: str = typer.Argument(...),
    namespace: str | None = NAMESPACE,
    top_k: int = typer.Option(10, "--top-k", min=1, metavar="K", help="At most this many results."),
    threshold: float = typer.Option(
        0.0, "--threshold", min=0.0, max=1.0, metavar="T", help="Minimum score."
    ),
    mode: str | None = typer.Option(
        None,
        "--mode",
        metavar="MODE",
        help="auto, fulltext, embedding, hybrid, jaccard or keyword (default: the config's).",
    ),
    where: list[str] = WHERE,
    all_namespaces: bool = ALL_NAMESPACES,
    as_json: bool = JSON,
) -> None:
    """Search memory records.

    Ranked full-text search (stemmed, accents ignored) by default, fused with embeddings
    when an embedding model is configured; in the retrieval namespace unless --namespace
    or --all-namespaces.
    """
    from koogcli.services import memory

    app_ctx = globals_of(ctx).build()
    hits = memory.search(
        app_ctx,
        query,
        namespace,
        top_k,
        threshold,
        mode,
        memory.parse_where(where),
        all_namespaces,
    )
    if as_json:
        render.json_out([views.record_dict(h.record, h) for h in hits])
    elif hits:
        render.out(views.hits_table(hits))
    else:
        render.note("no memory matched")


@app.command("list")
def list_(
    ctx: typer.Context,
    namespace: str | None = NAMESPACE,
    where: list[str] = WHERE,
    all_namespaces: bool = ALL_NAMESPACES,
    as_json: bool = JSON,
) -> None:
    """List records, oldest first.

    In the retrieval namespace unless --namespace or --all-namespaces.
    """
    from koogcli.services import memory

    records = memory.list_(
        globals_of(ctx).build(), namespace, all_namespaces, memory.parse_where(where)
    )
    if as_json:
        render.json_out([views.record_dict(r) for r in records])
    elif records:
        render.out(views.records_table(records))
    else:
        render.note("no memory records")


@app.command()
def show(
    ctx: typer.Context,
    record_id: str = typer.Argument(..., metavar="ID", help="An id, or 6+ characters of one."),
    as_json: bool = JSON,
) -> None:
    """Show one record with its metadata."""
    from koogcli.services import memory

    record = memory.show(globals_of(ctx).build(), record_id)
    session, message = memory.origin(record)
    if as_json:
        came = None if session is None else {"session": session, "message": message}
        render.json_out({**views.record_dict(record), "source": came})
        return
    render.out(f"{record.id}  {record.namespace}  {local_time(record.created_at)}")
    if session is not None:
        render.out(f"  from session {session}, message {message}")
    else:
        render.out("  added by hand (memory add)")
    # Stored text, shown as memory list shows it, to a terminal or not (--json: as it is).
    for key, value in record.metadata.items():
        render.out(render.visible(f"  {key} = {value}"))
    render.out("\n" + render.visible(record.content))


@app.command()
def forget(
    ctx: typer.Context,
    ids: list[str] | None = typer.Argument(
        None, metavar="[ID]...", help="Records: ids, or 6+ characters of them."
    ),
    where: list[str] = WHERE,
    session: str | None = typer.Option(
        None, "--session", "-s", metavar="NAME", help="Every record ingested from session NAME."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    as_json: bool = JSON,
) -> None:
    """Forget records for good: every index, and never ingested again."""
    from koogcli.core.names import SessionName
    from koogcli.services import memory

    app_ctx = globals_of(ctx).build()
    name = SessionName.parse(session).value if session is not None else None
    chosen = memory.forgettable(app_ctx, ids or [], memory.parse_where(where), name)
    if not chosen:
        render.note("no memory record matched; nothing was forgotten")
        if as_json:
            render.json_out({"forgotten": []})
        return
    shown = ", ".join(r.id[:8] for r in chosen[:5]) + (" ..." if len(chosen) > 5 else "")
    confirm_destructive(f"forget {len(chosen)} memory record(s) for good ({shown})", yes)
    done = memory.forget(app_ctx, chosen)
    if as_json:
        render.json_out({"forgotten": [r.id for r in done]})
    else:
        render.note(f"forgot {len(done)} memory record(s); ingestion will not add them again")


@app.command()
def delete(
    ctx: typer.Context,
    record_id: str = typer.Argument(..., metavar="ID"),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
) -> None:
    """Delete one record (ingestion may add it back)."""
    from koogcli.services import memory

    confirm_destructive(f"delete memory record {record_id}", yes)
    memory.delete(globals_of(ctx).build(), record_id)
    render.note(f"deleted {record_id}")


@app.command()
def ingest(
    ctx: typer.Context,
    session: str | None = session_option(),
    namespace: str | None = NAMESPACE,
    role: list[str] = typer.Option(
        [], "--role", metavar="ROLE", help="user, assistant, system or tool; repeatable."
    ),
    as_json: bool = JSON,
) -> None:
    """Store a session's messages as records, once each."""
    from koogcli.services import memory

    bad = [r for r in role if r not in ("user", "assistant", "system", "tool")]
    if bad:
        raise UsageError(f"unknown --role {bad[0]!r}", hint="use user, assistant, system or tool")
    app_ctx = globals_of(ctx).build()
    name = app_ctx.session(session)
    result = memory.ingest_session(app_ctx, name, namespace, role)
    if as_json:
        render.json_out(
            {
                "session": name.value,
                "namespace": result.namespace,
                "added": result.added,
                "skipped": result.skipped,
            }
        )
    else:
        render.note(
            f"ingested {result.added} messages of {name.value} into {result.namespace} "
            f"({result.skipped} already there)"
        )


@app.command()
def recall(
    ctx: typer.Context,
    query: str = typer.Argument(...),
    session: str | None = session_option(),
    namespace: str | None = NAMESPACE,
    top_k: int = typer.Option(5, "--top-k", min=1, metavar="K", help="At most this many records."),
    as_json: bool = JSON,
) -> None:
    """Pin matching records into a session.

    They become one memory message, which compression keeps.
    """
    from koogcli.services import memory

    app_ctx = globals_of(ctx).build()
    name = app_ctx.session(session)
    result = memory.recall(app_ctx, name, query, namespace, top_k)
    if as_json:
        render.json_out(
            {
                "session": name.value,
                "pinned": len(result.hits),
                "message": result.message.to_dict() if result.message else None,
                "checkpoint": result.checkpoint,
            }
        )
    elif result.message is None:
        render.note("no memory matched; nothing pinned")
    else:
        render.note(f"pinned {len(result.hits)} memories into {name.value}")

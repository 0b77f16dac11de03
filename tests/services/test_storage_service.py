"""`koog storage prune` and status on both backends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from koogcli.core.names import SessionName
from koogcli.services import checkpoints, history, storage
from koogcli.services.turn import TurnRequest, run_turn
from tests.support.stored import roll

pytestmark = pytest.mark.usefixtures("backend")

S = SessionName("pr")


def test_prune_removes_old_steps_and_keeps_restore_points(make_ctx: Callable[..., Any]) -> None:
    ctx = make_ctx()
    for text in ("one", "two", "three"):
        run_turn(ctx, TurnRequest(S, text))
    kinds = [c.kind for c in ctx.checkpoints.headers(S)]
    assert {"step", "tombstone", "restore"} <= set(kinds)
    assert storage.prune(ctx, older_than_days=1).checkpoints == 0
    report = storage.prune(ctx, older_than_days=0)
    assert report.checkpoints == kinds.count("step") + kinds.count("tombstone")
    assert [c.kind for c in ctx.checkpoints.headers(S)] == ["restore"] * 3
    first = checkpoints.list_(ctx, S)[-1]
    second = checkpoints.list_(ctx, S)[-2]
    roll(ctx, S, second, compensate=False)
    assert [m.text for m in ctx.history.read(S).messages if m.role == "user"] == ["one"]
    assert first.message_count == 0


def test_message_rows_go_with_the_last_checkpoint_referring_to_them(
    make_ctx: Callable[..., Any],
) -> None:
    ctx = make_ctx()
    for text in ("alpha", "beta"):
        run_turn(ctx, TurnRequest(S, text))

    def count() -> Any:
        return storage.status(ctx)["counts"]["messages"]  # type: ignore[index]

    assert count() >= 5
    for c in ctx.checkpoints.headers(S):
        ctx.checkpoints.delete(S, c.id)
    history.clear(ctx, S)
    for c in ctx.checkpoints.headers(S):  # the restore point `clear` took
        ctx.checkpoints.delete(S, c.id)
    storage.prune(ctx, older_than_days=0)
    assert count() == 0
    assert ctx.history.read(S).messages == []


def test_status_names_the_backend(make_ctx: Callable[..., Any], backend: str) -> None:
    ctx = make_ctx()
    run_turn(ctx, TurnRequest(S, "hi"))
    info = storage.status(ctx)
    assert info["backend"] == {"files": "files", "postgresql": "postgresql"}[backend]
    assert info["counts"]["sessions"] == 1  # type: ignore[index]


@pytest.mark.postgresql_only  # files keep messages in the document, not as shared rows
def test_a_row_another_process_pruned_is_stored_again_not_referred_to(
    make_ctx: Callable[..., Any],
) -> None:
    """A turn remembers the row of its new message from its step checkpoint; another
    process prunes that checkpoint and the row with it while the turn waits to store. The
    stored history must hold the message, not a reference to the deleted row."""
    from koogcli.adapters.sql import rows
    from koogcli.core.checkpoints import Checkpoint
    from koogcli.core.messages import user

    ctx = make_ctx()
    message = user("hello")
    ctx.checkpoints.save(Checkpoint("c1", S.value, 0, "step", "2026-01-01", (message,)))
    db = ctx.checkpoints.db
    with db.transaction() as cur:  # as another koog's prune: by SQL, so this one's cache stays
        cur.execute("DELETE FROM checkpoints WHERE session = %s", [S.value])
        cur.execute("DELETE FROM messages WHERE session = %s", [S.value])
    ctx.history.write(S, [message], expected_revision=None)
    rows.forget(ctx.history.db, S.value)  # read as a new process would
    assert ctx.history.read(S).messages == [message]


@pytest.mark.postgresql_only
def test_rows_of_a_history_that_changed_since_it_was_read_are_looked_at_again(
    make_ctx: Callable[..., Any],
) -> None:
    """The rows of the history this process read need no look while the session is still
    that version; once another process rewrote it and pruned a row, they do."""
    from koogcli.adapters.sql import rows
    from koogcli.core.checkpoints import Checkpoint
    from koogcli.core.messages import user

    ctx = make_ctx()
    ctx.history.write(S, [user("one"), user("two")], expected_revision=None)
    loaded = tuple(ctx.history.read(S).messages)
    with ctx.checkpoints.db.transaction() as cur:  # another koog: clear, then prune
        cur.execute("UPDATE sessions SET revision = 2, items = '{}' WHERE name = %s", [S.value])
        cur.execute("DELETE FROM messages WHERE session = %s", [S.value])
    ctx.checkpoints.save(Checkpoint("c1", S.value, 0, "restore", "2026-01-01", loaded))
    rows.forget(ctx.history.db, S.value)  # read as a new process would
    assert ctx.checkpoints.get(S, "c1").messages == loaded

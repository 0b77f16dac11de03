"""A whole session's rows renamed or deleted in one transaction, on SQLite and PostgreSQL.

Every table keyed by session name moves at once, under the session's rows lock held
exclusively (rows.guard), and every process's map of the session's message rows is
read again afterwards (rows.rows_deleted). A second call finds nothing to move.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from koogcli.adapters.sql import rows
from koogcli.adapters.sql.migrations import STORE
from koogcli.core.names import SessionName

# The tables both backends keep, as (table, column naming the session).
SESSION_TABLES = tuple((t, "session") for step in STORE.steps for t in step.keyed_by_session)


def rename_everywhere(
    db: Any,
    old: SessionName,
    new: SessionName,
    tables: Sequence[tuple[str, str]] = (),
    then: Callable[[Any], None] | None = None,
) -> None:
    """`tables` are the backend's own, beside the shared ones; `then` runs last in the
    same transaction."""
    if not db.exists():
        return
    with db.transaction() as cur:
        rows.guard(cur, db, old.value, exclusive=True)
        for table, column in (*tables, *SESSION_TABLES):
            cur.execute(
                f"UPDATE {table} SET {column} = %s WHERE {column} = %s", [new.value, old.value]
            )
        if then is not None:
            then(cur)
        rows.rows_deleted(cur, db, old.value)
        rows.rows_deleted(cur, db, new.value)


def drop_everywhere(db: Any, session: SessionName, tables: Sequence[tuple[str, str]] = ()) -> None:
    if not db.exists():
        return
    with db.transaction() as cur:
        rows.guard(cur, db, session.value, exclusive=True)
        for table, column in (*tables, *SESSION_TABLES):
            cur.execute(f"DELETE FROM {table} WHERE {column} = %s", [session.value])
        rows.rows_deleted(cur, db, session.value)

"""The PostgreSQL backend through the real binary: configuration, status, migrations,
and many processes (on one or two "machines") writing one session."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from koogcli.adapters.sql.migrations import POSTGRES_LATEST
from tests.conftest import API_KEY
from tests.support.pg_server import PgServer
from tests.support.turn_workers import expected, run_workers, user_turns
from tests.support.zygote import Zygote

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]
PASSWORD = "pw-Zq81-never-shown"


@pytest.fixture
def pg_env(postgres: PgServer) -> dict[str, str]:
    """A schema of its own, reached with a URL holding a password (the test server trusts
    loopback, so the password is sent nowhere, but koog must never write or show it)."""
    url = postgres.url.replace("koog@", f"koog:{PASSWORD}@")
    return {"KOOG_DATABASE_URL": url, "KOOG_DATABASE_SCHEMA": f"e_{uuid.uuid4().hex[:12]}"}


def _sql(postgres: PgServer, schema: str, statement: str) -> list[tuple[object, ...]]:
    with psycopg.connect(postgres.url, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}")
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


def test_turns_are_stored_in_the_database_and_the_password_is_never_shown(
    run_koog: Run, pg_env: dict[str, str], postgres: PgServer, data_dir: Path
) -> None:
    for text in ("first", "second"):
        done = run_koog("chat", "-s", "work", input=text, env=pg_env)
        assert done.returncode == 0, done.stderr
    shown = run_koog("history", "show", "-s", "work", "--json", env=pg_env)
    assert [m["content"] for m in json.loads(shown.stdout) if m["role"] == "user"] == [
        "first",
        "second",
    ]
    status = run_koog("storage", "status", env=pg_env)
    assert "backend: postgresql" in status.stdout and "version: 6 (current)" in status.stdout
    assert "sessions: 1" in status.stdout
    config = run_koog("config", "show", env=pg_env)
    outputs = [shown, status, config, run_koog("checkpoint", "list", "-s", "work", env=pg_env)]
    assert all(PASSWORD not in o.stdout + o.stderr for o in outputs)
    written = [p for p in data_dir.rglob("*") if p.is_file()] if data_dir.exists() else []
    assert all(PASSWORD.encode() not in p.read_bytes() for p in written)
    rows = _sql(postgres, pg_env["KOOG_DATABASE_SCHEMA"], "SELECT count(*) FROM transcript")
    assert rows == [(4,)]


def test_a_password_in_the_config_file_is_refused(
    run_koog: Run, postgres: PgServer, write_config: Callable[[str], Path]
) -> None:
    url = postgres.url.replace("koog@", f"koog:{PASSWORD}@")
    path = write_config(f'[llm]\nmodel = "m"\n\n[storage]\nurl = "{url}"\n')
    done = run_koog("history", "list", env={"KOOG_CONFIG": str(path)})
    assert done.returncode == 2
    assert f"{path}:5: storage.url holds a password" in done.stderr
    assert "PGPASSWORD" in done.stderr and PASSWORD not in done.stderr


def test_an_unreachable_database_exits_3_naming_host_and_port(run_koog: Run) -> None:
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://koog:{PASSWORD}@127.0.0.1:{port}/team"
    done = run_koog("chat", "-s", "x", input="hi", env={"KOOG_DATABASE_URL": url})
    assert done.returncode == 3
    assert f"cannot reach the PostgreSQL database at 127.0.0.1:{port}/team" in done.stderr
    assert PASSWORD not in done.stderr and "Traceback" not in done.stderr


def test_a_schema_newer_than_the_program_is_refused(
    run_koog: Run, pg_env: dict[str, str], postgres: PgServer
) -> None:
    assert run_koog("storage", "migrate", env=pg_env).returncode == 0
    schema = pg_env["KOOG_DATABASE_SCHEMA"]
    _sql(postgres, schema, "INSERT INTO koog_schema (version) VALUES (99)")
    for args in (("history", "list"), ("storage", "migrate")):
        done = run_koog(*args, env=pg_env)
        assert done.returncode == 3, done.stderr
        assert "is at version 99, newer than this koog" in done.stderr
    assert "version: 99" in run_koog("storage", "status", env=pg_env).stdout


def test_two_concurrent_migrations_apply_each_version_once(
    koog_env: dict[str, str], pg_env: dict[str, str], postgres: PgServer
) -> None:
    env = {**koog_env, **pg_env}
    koog = str(Path(sys.executable).parent / "koog")
    procs = [
        subprocess.Popen(
            [koog, "storage", "migrate"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    said = sorted(out + err for out, err in outputs)
    assert sum("applied migration" in s for s in said) == 1, said
    assert sum("nothing to do" in s for s in said) == 1, said
    rows = _sql(postgres, pg_env["KOOG_DATABASE_SCHEMA"], "SELECT version FROM koog_schema")
    assert sorted(r[0] for r in rows) == list(range(1, POSTGRES_LATEST + 1))


def test_a_schema_at_version_1_asks_to_migrate_and_migrates_with_its_data(
    run_koog: Run, pg_env: dict[str, str]
) -> None:
    from koogcli.adapters.postgres import migrations
    from koogcli.adapters.postgres.database import Database
    from koogcli.adapters.postgres.sessions import PgHistoryStore
    from koogcli.core.messages import assistant, user
    from koogcli.core.names import SessionName

    db = Database(pg_env["KOOG_DATABASE_URL"], pg_env["KOOG_DATABASE_SCHEMA"], check_version=False)
    assert migrations.migrate(db, target=1) == [1]
    PgHistoryStore(db).write(SessionName("old"), [user("kept?"), assistant("kept.")], 0)
    db.close()
    refused = run_koog("history", "show", "-s", "old", env=pg_env)
    assert refused.returncode == 3
    assert "is at version 1; this koog needs version 6" in refused.stderr
    assert "koog storage migrate" in refused.stderr
    done = run_koog("storage", "migrate", env=pg_env)
    assert done.returncode == 0 and "applied migrations 2, 3" in done.stdout, done.stderr
    shown = run_koog("history", "show", "-s", "old", env=pg_env)
    assert shown.stdout.splitlines() == ["[user] kept?", "[assistant] kept."]
    assert run_koog("memory", "add", "now with memory", env=pg_env).returncode == 0


@pytest.mark.parametrize("machines", [1, 2])
def test_four_processes_of_25_turns_lose_and_duplicate_nothing(
    koog_env: dict[str, str], pg_env: dict[str, str], tmp_path: Path, machines: int
) -> None:
    """With two machines each pair of processes has its own data dir: only the database
    is shared, as between two computers."""
    env = {**koog_env, **pg_env}
    run_workers(
        [{**env, "KOOG_DATA_DIR": str(tmp_path / f"m{w % machines}")} for w in range(4)], 25
    )
    users = user_turns({**env, "OPENAI_API_KEY": API_KEY})
    assert sorted(users) == expected(4, 25)
    assert set(users.values()) == {1}


def _fill(env: dict[str, str], sessions: int, turns: int) -> None:
    """Sessions with turns, a manual checkpoint and a rollback, through koog's services
    and the real openai client (quicker than a process per turn)."""
    from koogcli.core.names import SessionName
    from koogcli.services import checkpoints, compose, memory
    from koogcli.services.turn import TurnRequest, run_turn
    from tests.support.stored import roll

    ctx = compose.build(env=env)
    for n in range(12):
        memory.add(ctx, f"fact {n} about deploys", f"ns{n % 2}", {"n": str(n)})
    for s in range(sessions):
        name = SessionName(f"s{s}")
        for t in range(turns):
            run_turn(ctx, TurnRequest(name, f"s{s} turn {t} " + "words " * 40))
        checkpoints.create(ctx, name, f"label-{s}")
        point = checkpoints.list_(ctx, name)[2]
        roll(ctx, name, point, compensate=False)


def _picture(env: dict[str, str]) -> dict[str, object]:
    """What `history export` and `checkpoint list --all --json` show of every session."""
    from koogcli.core.names import SessionName
    from koogcli.services import checkpoints, compose, history
    from koogcli.ui import views

    ctx = compose.build(env=env)
    names = sorted(s.name for s in ctx.history.sessions())
    store = ctx.long_term_memory
    return {
        "memory": [views.record_dict(r) for r in store.records()],
        "vectors": store.vectors(),
    } | {
        name: (
            history.export(ctx, SessionName(name)),
            [views.checkpoint_dict(c) for c in checkpoints.list_(ctx, SessionName(name), True)],
            ctx.transcript.read(SessionName(name)),
        )
        for name in names
    }


def test_copy_files_to_postgresql_to_a_fresh_dir_keeps_everything_and_resumes(
    koog_env: dict[str, str],
    pg_env: dict[str, str],
    postgres: PgServer,
    tmp_path: Path,
    run_koog: Run,
    zygote: Zygote,
) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    config = tmp_path / "embed.toml"
    config.write_text('[long_term_memory.embeddings]\nmodel = "test-embed"\n')
    files = {**koog_env, "KOOG_DATA_DIR": str(source), "KOOG_CONFIG": str(config)}
    _fill(files, sessions=6, turns=4)
    url = pg_env["KOOG_DATABASE_URL"]
    schema = {"KOOG_DATABASE_SCHEMA": pg_env["KOOG_DATABASE_SCHEMA"]}
    first = run_koog("storage", "copy", "--from", str(source), "--to", url, "--json", env=schema)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert (report["sessions"], report["histories"], report["skipped"]) == (6, 6, [])
    assert (report["memory_records"], report["memory_vectors"]) == (12, 12)
    assert PASSWORD not in first.stdout + first.stderr
    again = json.loads(
        run_koog("storage", "copy", "--from", str(source), "--to", url, "--json", env=schema).stdout
    )
    assert (again["histories"], again["transcript_messages"], again["checkpoints"]) == (0, 0, 0)
    # Copies killed part-way (at random moments inside one), then one run to the end.
    started = time.monotonic()
    timed = zygote.spawn(
        "storage",
        "copy",
        "--from",
        url,
        "--to",
        str(tmp_path / "timed"),
        env={**koog_env, **schema},
    )
    assert timed.wait(timeout=60) == 0
    span = time.monotonic() - started
    rng = random.Random(7)
    killed = 0
    for fraction in (rng.uniform(0.3, 0.9) for _ in range(3)):
        proc = zygote.spawn(
            "storage", "copy", "--from", url, "--to", str(target), env={**koog_env, **schema}
        )
        time.sleep(span * fraction)
        proc.kill()
        killed += proc.wait() == -9
    assert killed >= 1, "every copy finished before it was killed"
    last = run_koog("storage", "copy", "--from", url, "--to", str(target), env=schema)
    assert last.returncode == 0, last.stderr
    on_files = _picture(files)
    assert len(on_files) == 8 and len(on_files["vectors"]) == 12  # type: ignore[arg-type]
    assert _picture({**koog_env, **pg_env, "KOOG_CONFIG": str(config)}) == on_files
    assert (
        _picture({**koog_env, "KOOG_DATA_DIR": str(target), "KOOG_CONFIG": str(config)}) == on_files
    )


def test_a_table_locked_by_another_connection_is_exit_3_naming_it_never_a_hang(
    forked_koog: Run, pg_env: dict[str, str], postgres: PgServer, tmp_path: Path
) -> None:
    run_koog = forked_koog
    config = tmp_path / "locks.toml"
    config.write_text("[storage]\nlock_timeout_seconds = 1\n")
    env = {**pg_env, "KOOG_CONFIG": str(config)}
    assert run_koog("chat", "-s", "held", "first", env=env).returncode == 0
    schema = pg_env["KOOG_DATABASE_SCHEMA"]
    tables = [
        str(row[0])
        for row in _sql(
            postgres, schema, f"SELECT tablename FROM pg_tables WHERE schemaname = '{schema}'"
        )
    ]
    assert {"sessions", "messages", "transcript", "checkpoints", "koog_schema"} <= set(tables)
    outcomes = {}
    for table in sorted(tables):
        with psycopg.connect(postgres.url) as holder:  # a transaction until the block ends
            holder.execute(f"LOCK TABLE {schema}.{table} IN ACCESS EXCLUSIVE MODE")
            started = time.monotonic()
            result = run_koog("chat", "-s", "held", f"while {table} is locked", env=env)
            took = time.monotonic() - started
        assert took < 1 + 2 + 1.5, (table, took)  # the lock timeout + 2 s (+ start-up)
        assert result.returncode in (0, 3), (table, result.stderr)
        if result.returncode == 3:
            first = result.stderr.splitlines()[0]
            assert f"table {schema}.{table}" in first and "waited 1 s for a lock" in first, first
        outcomes[table] = result.returncode
    for table in ("sessions", "messages", "transcript", "checkpoints", "koog_schema"):
        assert outcomes[table] == 3, outcomes

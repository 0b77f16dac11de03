"""Test isolation: every test gets its own data and config folders and a clean environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.chat_model import FakeChatModel
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support import pg_server
from tests.support.pg_server import PgServer
from tests.support.zygote import Zygote

# Where PYTHONDONTWRITEBYTECODE is set (this project's development machine sets it), every
# run would rewrite every test module's asserts again and every koog process would compile
# every changed module again: about two seconds per worker and a tenth of a second per koog
# started. The caches go where pip and pytest put them anyway (ignored by git).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

API_KEY = "sk-test-SECRET-0123456789abcdef"
KOOG_BIN = str(Path(sys.executable).parent / "koog")


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "KOOG_")):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("KOOG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("KOOG_DEBUG", "1")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def data_dir(isolated: Path) -> Path:
    return isolated / "data"


@pytest.fixture(scope="session")
def _server() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer().start()
    yield server
    server.stop()


@pytest.fixture
def server(_server: FakeOpenAIServer) -> FakeOpenAIServer:
    _server.reset()
    return _server


_STARTING: list[Future[PgServer]] = []


@pytest.fixture(scope="session", autouse=True)
def _start_postgres_early(request: pytest.FixtureRequest) -> Iterator[None]:
    """When any collected test runs on PostgreSQL, the server starts in the background at
    once, so its two seconds overlap the first tests instead of delaying one."""
    wanted = {"postgres", "backend", "new_memory_store", "pg_env"}
    if any(wanted & set(getattr(item, "fixturenames", ())) for item in request.session.items):
        _STARTING.append(ThreadPoolExecutor(1).submit(pg_server.start))
    yield
    if _STARTING and _STARTING[0].done() and _STARTING[0].exception() is None:
        _STARTING[0].result().stop()


@pytest.fixture(scope="session")
def postgres() -> PgServer:
    """One real PostgreSQL per test worker. Skipped, with the reason, only when it cannot
    start outside CI; under CI (env CI set) that is a failure."""
    if not _STARTING:
        _STARTING.append(ThreadPoolExecutor(1).submit(pg_server.start))
    try:
        return _STARTING[0].result()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL did not start: {exc}")
        pytest.skip(f"PostgreSQL did not start: {exc}")


@pytest.fixture(params=["files", "postgresql"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, isolated: Path) -> str:
    """Runs a test on each storage backend: files under the data dir, and PostgreSQL (a
    schema of its own per test, in the session's server)."""
    if request.param == "postgresql":
        server = request.getfixturevalue("postgres")
        monkeypatch.setenv("KOOG_DATABASE_URL", server.url)
        monkeypatch.setenv("KOOG_DATABASE_SCHEMA", f"t_{uuid.uuid4().hex[:12]}")
    return str(request.param)


@pytest.fixture
def new_memory_store(backend: str, tmp_path: Path) -> Callable[[], Any]:
    """A memory store on the test's backend; each call opens the same memory again."""

    def new() -> Any:
        if backend == "files":
            from koogcli.adapters.sql.sqlite_memory import SqliteMemoryStore

            return SqliteMemoryStore(tmp_path / "memory.sqlite3")
        from koogcli.adapters.postgres.database import Database
        from koogcli.adapters.postgres.memory import PgMemoryStore

        env = os.environ
        return PgMemoryStore(Database(env["KOOG_DATABASE_URL"], env["KOOG_DATABASE_SCHEMA"]))

    return new


@pytest.fixture
def fake_model() -> FakeChatModel:
    return FakeChatModel()


@pytest.fixture
def write_config(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        path = isolated / "config.toml"
        path.write_text(text, encoding="utf-8")
        monkeypatch.setenv("KOOG_CONFIG", str(path))
        return path

    return write


@pytest.fixture
def make_ctx(fake_model: FakeChatModel) -> Callable[..., Any]:
    """An AppContext over real files in the temp data dir, with a fake or given model."""
    from koogcli.services import compose

    def make(model: Any = None, flags: dict[str, object] | None = None, **env: str) -> Any:
        chosen = model or fake_model
        environment = dict(os.environ, **env)
        return compose.build(env=environment, flags=flags, model_factory=lambda ctx: chosen)

    return make


SERVICE_TOOLS = '''
import json, os
LOG = {log!r}
def _log(entry):
    with open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\\n")
def create_user(name: str) -> str:
    """Create a user."""
    _log(["create_user", name])
    return f"created {{name}}"
def remove_user(name: str) -> str:
    _log(["remove_user", name])
    if name == "Broken":
        raise RuntimeError("cannot remove Broken")
    return f"removed {{name}}"
def lookup(city: str) -> str:
    """Look a city up."""
    _log(["lookup", city])
    return "Ferdinand Magellan sailed from " + city
'''


@pytest.fixture
def tools(write_config: Callable[[str], Path], tmp_path: Path) -> Callable[[], list[list[str]]]:
    """Tools for in-process turns (create_user with remove_user, lookup); returns their log."""
    module = f"ktools_{uuid.uuid4().hex[:8]}"
    log = tmp_path / "tool-log.jsonl"
    (tmp_path / f"{module}.py").write_text(SERVICE_TOOLS.format(log=str(log)))
    write_config(
        f'[[tools]]\ncallable = "{module}:create_user"\nrollback = "{module}:remove_user"\n'
        f'[[tools]]\ncallable = "{module}:lookup"\n'
    )
    return lambda: (
        [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    )


@pytest.fixture
def serve(backend: str, koog_env: dict[str, str], isolated: Path) -> Iterator[Any]:
    """A real `koog serve` on the test's backend (chosen first, so `koog_env` and
    `run_koog` carry it too), stopped after the test: it must exit 0."""
    from tests.support.serving import KoogServe

    started = KoogServe(koog_env, log=isolated / "serve.log").start()
    yield started
    assert started.stop() == 0


@pytest.fixture
def serve_files(koog_env: dict[str, str], isolated: Path) -> Iterator[Any]:
    """`serve` on files only: for what does not depend on the backend."""
    from tests.support.serving import KoogServe

    started = KoogServe(koog_env, log=isolated / "serve.log").start()
    yield started
    assert started.stop() == 0


@pytest.fixture
def koog_env(server: FakeOpenAIServer, isolated: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KOOG_DEBUG", None)
    # A model named as users of a local server name one; without it koog would ask the
    # server for its first model (tested on its own) and say so on stderr.
    env.update(
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY=API_KEY,
        KOOG_MAX_RETRIES="0",
        KOOG_MODEL="gpt-4o-mini",
    )
    return env


@pytest.fixture
def run_koog(koog_env: dict[str, str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the installed `koog` binary against the test server, always with a timeout."""

    def run(
        *args: str, input: str | None = None, env: dict[str, str] | None = None, timeout: float = 30
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KOOG_BIN, *args],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            env={**koog_env, **(env or {})},
            timeout=timeout,
        )

    return run


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under a folder with its bytes, to prove a failure changed nothing. SQLite's
    `-shm` files are left out: shared memory between its connections, which readers touch
    too; they hold no data."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith("-shm")
    }


def spawn_koog(*args: str, env: dict[str, str], capture: bool = False) -> subprocess.Popen[str]:
    """Start the installed `koog` in the background, to signal or kill it mid-way."""
    out = subprocess.PIPE if capture else subprocess.DEVNULL
    return subprocess.Popen(
        [KOOG_BIN, *args], env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out, text=True
    )


@pytest.fixture(scope="session")
def zygote() -> Iterator[Zygote]:
    """Forks koog processes in milliseconds, for tests that kill dozens (tests/support/zygote.py)."""
    forks = Zygote()
    yield forks
    forks.close()


def forked_run_koog(
    forked_koog: Callable[..., subprocess.CompletedProcess[str]],
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`run_koog` for a module that runs koog dozens of times: processes forked from the
    zygote (`run_koog = pytest.fixture(name="run_koog")(forked_run_koog)` in the module)."""
    return forked_koog


@pytest.fixture
def forked_koog(
    zygote: Zygote, koog_env: dict[str, str], tmp_path: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`run_koog` for tests that run koog dozens of times: each a koog process forked from
    the zygote (its own pid, files and exit; the imports done once), with the same
    environment, input and captured output."""
    count = iter(range(1_000_000))

    def run(
        *args: str, input: str | None = None, env: dict[str, str] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        n = next(count)
        stdin, stdout, stderr = (tmp_path / f".koog-{n}.{part}" for part in ("in", "out", "err"))
        stdin.write_text(input or "")
        proc = zygote.spawn(
            *args, env={**koog_env, **(env or {})}, stdin=stdin, stdout=stdout, stderr=stderr
        )
        code = proc.wait(timeout=timeout)
        done = subprocess.CompletedProcess(
            [KOOG_BIN, *args], code, stdout.read_text(), stderr.read_text()
        )
        for part in (stdin, stdout, stderr):
            part.unlink()
        return done

    return run


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked files_only or postgresql_only run on that backend only (the other is
    deselected, not skipped)."""
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec is not None else None
        other = {"files": "postgresql_only", "postgresql": "files_only"}.get(str(backend))
        (drop if other and item.get_closest_marker(other) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep

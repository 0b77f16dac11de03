"""`koog serve`: an OpenAI-compatible endpoint giving any client koog's sessions and memory
(SPEC §6). Starts the ASGI app of server/ under uvicorn; both are imported only here."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from koogcli.cli import process
from koogcli.cli.options import Globals, globals_of
from koogcli.core.errors import KoogError, UsageError
from koogcli.ui import render

if TYPE_CHECKING:  # socket and signal too: every command imports this module at start-up
    import socket
    import subprocess

    from koogcli.services.context import AppContext


def serve(
    ctx: typer.Context,
    host: str | None = typer.Option(
        None, "--host", metavar="HOST", help="Address to listen on (default 127.0.0.1)."
    ),
    port: int | None = typer.Option(
        None, "--port", min=0, max=65535, metavar="PORT", help="Port (default 8765; 0: any free)."
    ),
    workers: int = typer.Option(
        1, "--workers", min=1, max=64, metavar="N", help="Processes answering on the port."
    ),
    print_token: bool = typer.Option(
        False,
        "--print-token",
        help="Print the token clients send where one is required without [serve] tokens, and exit.",
    ),
) -> None:
    """An OpenAI-compatible endpoint with koog's memory.

    Point any OpenAI client's base URL at it; the header X-Koog-Session: NAME keeps the
    conversation in session NAME. Ctrl-C or SIGTERM finish the replies in flight and stop.
    With --workers N, N processes share the port and the store; a session still takes one
    request at a time.
    """

    from koogcli.core.urls import masked
    from koogcli.server.guard import who_is_served
    from koogcli.services import compose

    app_ctx = globals_of(ctx).build()
    if print_token:
        render.out(compose.serve_token(app_ctx))
        return
    settings = app_ctx.settings.serve
    host = host or settings.host
    port = settings.port if port is None else port
    if not settings.tokens and not _loopback(host):
        raise UsageError(
            f"--host {host} is not a loopback address and [serve] tokens is empty",
            hint="add [[serve.tokens]] to the config (see config.example.toml), or serve on "
            "127.0.0.1",
        )
    # One request, one attempt: the clients of a server retry themselves.
    llm = app_ctx.settings.llm.model_copy(update={"max_retries": settings.upstream_retries})
    app_ctx = app_ctx.with_settings(app_ctx.settings.model_copy(update={"llm": llm}), False)
    app_ctx, found = app_ctx.with_endpoint()
    if found is not None:
        render.note(found)
    served = who_is_served(settings)
    kept = compose.serve_token(app_ctx) if served == "kept-token" else None
    where = app_ctx.storage.describe()  # storage problems show before anything listens
    listener = _listen(host, port)
    bound_host, bound_port = listener.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    upstream = masked(app_ctx.settings.llm.base_url or "https://api.openai.com/v1")
    process.StopAsked.listen()  # a stop from now on is acted on once serving begins
    render.out(
        f"koog serve: http://{shown}:{bound_port}/v1 · storage: {where.get('backend')} "
        f"({where.get('where', '')}) · upstream: {upstream} ({app_ctx.settings.llm.model})"
        + (f" · {workers} workers" if workers > 1 else "")
        + (" · clients send the token koog serve --print-token shows" if kept else "")
    )
    sys.stdout.flush()  # whoever started it may be waiting for the line
    watching = _archive_watchers(globals_of(ctx), app_ctx)
    import os

    secret = os.urandom(32)  # signs the page's action tokens, the same in every worker
    try:
        if workers == 1:
            _run(app_ctx, listener, bound_host, kept, secret)
        else:
            _supervise(app_ctx, listener, bound_host, workers, kept, secret)
    finally:
        for child in watching:
            child.terminate()
        for child in watching:
            child.wait()


def _archive_watchers(given: Globals, app_ctx: AppContext) -> list[subprocess.Popen[bytes]]:
    """`[archive] sources`: one `koog history import --from SOURCE --watch` per source,
    beside serve and stopped with it (its lines go to serve's stderr)."""
    import subprocess

    archive = app_ctx.settings.archive
    flags = [
        *(["--config", given.config] if given.config else []),
        *(["--data-dir", given.data_dir] if given.data_dir else []),
    ]
    children = []
    for source in dict.fromkeys(archive.sources):
        argv = [sys.executable, "-m", "koogcli", *flags, "history", "import", "--from", source]
        argv += ["--watch", "--interval", str(archive.interval_seconds)]
        children.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr))
        every = f"every {archive.interval_seconds:g}s"
        render.note(f"koog serve: importing {source} as it changes ({every})")
    return children


def _supervise(
    app_ctx: AppContext,
    listener: socket.socket,
    bound_host: str,
    count: int,
    kept: str | None,
    secret: bytes,
) -> None:
    """`count` forked workers accepting on one listening socket; a worker that dies is
    replaced; SIGTERM or Ctrl-C stop them all gracefully (each finishes its replies in
    flight). Workers share the store as separate koog processes do: a session's requests
    are serialized by the cross-process turn lock (flock, or PostgreSQL's advisory lock)."""
    import contextlib
    import os
    import signal
    import time
    from types import FrameType

    failed = False
    workers: dict[int, float] = {}  # pid -> when it started
    stopping = False
    supervisor = os.getpid()
    signals = {signal.SIGINT, signal.SIGTERM}

    def start() -> None:
        if stopping:
            return
        # Blocked across the fork: a stop arriving now reaches the supervisor once the
        # worker is in `workers`, and never runs the supervisor's handler in the worker.
        signal.pthread_sigmask(signal.SIG_BLOCK, signals)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for sig in signals:
                    signal.signal(sig, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
                process.die_with(supervisor)  # a supervisor killed with -9 takes them along
                _run(app_ctx, listener, bound_host, kept, secret)
                code = 0
            except BaseException as exc:  # told in one line; the supervisor starts another
                sys.stderr.write(f"koog: serve worker {os.getpid()}: {exc!r}\n")
            finally:
                os._exit(code)
        workers[pid] = time.monotonic()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)

    def stop(sig: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for pid in workers:  # SIGTERM: a terminal's Ctrl-C already reached them as SIGINT
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    for sig in signals:
        signal.signal(sig, stop)
    if process.StopAsked.signal is not None:  # asked before the handlers above
        stopping = True
    app_ctx.storage.prepare()  # created or upgraded once, not raced by the workers
    app_ctx.storage.close()  # each worker opens its own connections
    for _ in range(count):
        start()
    quick = 0  # workers in a row that died within seconds of starting
    while workers:
        try:
            pid, _status = os.wait()
        except ChildProcessError:
            break
        started = workers.pop(pid, time.monotonic())
        if stopping:
            continue
        quick = quick + 1 if time.monotonic() - started < 5 else 0
        if quick >= 5:
            said = f"serve workers keep ending as they start ({quick} in a row); stopping"
            render.error(KoogError(said, hint="the lines above say why"))
            stop(signal.SIGTERM, None)
            failed = True
            continue
        render.warning(f"a serve worker (pid {pid}) ended; starting another")
        time.sleep(min(5.0, 0.1 * 2**quick) if quick else 0)
        start()
    if failed:
        raise typer.Exit(1)


def _run(
    app_ctx: AppContext, listener: socket.socket, bound_host: str, kept: str | None, secret: bytes
) -> None:
    import signal
    from types import FrameType

    import uvicorn

    from koogcli.server.app import create_app
    from koogcli.server.connections import protocol
    from koogcli.server.guard import Guard
    from koogcli.server.state import ServerState

    settings = app_ctx.settings.serve
    state = ServerState(app_ctx, kept_token=kept, page_secret=secret)
    config = uvicorn.Config(
        Guard(create_app(state), settings, bound_host),
        http=protocol(settings.header_timeout_seconds, settings.max_connections),
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws="none",  # a WebSocket upgrade is answered as HTTP (Codex's probe gets a 426)
        timeout_graceful_shutdown=int(settings.shutdown_seconds) or None,
        timeout_keep_alive=max(1, round(settings.idle_timeout_seconds)),
        h11_max_incomplete_event_size=64 * 1024,  # a request head larger than this: 400
        server_header=False,
        # Who connects is told by the socket alone: uvicorn would otherwise take the
        # client's address from X-Forwarded-For on loopback, and the owner check with it.
        proxy_headers=False,
    )

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            """Stop gracefully and exit 0 (uvicorn would raise the signal again once
            stopped, ending the process with it); a second Ctrl-C stops at once."""
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            self.should_exit = True
            state.stopping.set()  # the page's live updates end, so nothing waits on them

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            """A stop asked before uvicorn took the signals ends it here."""
            await super().startup(sockets=sockets)
            if process.StopAsked.signal is not None:
                self.should_exit = True

    import logging

    # Codex's WebSocket probe is answered with a 426 (server/responses/route.py); uvicorn would
    # also warn twice on stderr for each one.
    logging.getLogger("uvicorn.error").addFilter(
        lambda record: (
            "upgrade request" not in record.getMessage()
            and "WebSocket library" not in record.getMessage()
        )
    )
    with process.serving():
        Server(config).run(sockets=[listener])
    state.pool.shutdown(wait=True, cancel_futures=False)


def _listen(host: str, port: int) -> socket.socket:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror}",
            hint="choose another --port, or stop what uses it",
        ) from exc
    listener.listen(128)
    listener.set_inheritable(True)
    return listener


def _loopback(host: str) -> bool:
    """Whether every address the host resolves to is a loopback one (its spelling
    proves nothing: `127.0.0.1.nip.io` is a public name)."""
    import ipaddress
    import socket

    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    addresses = {str(info[4][0]) for info in found}
    return bool(addresses) and all(
        ipaddress.ip_address(a.partition("%")[0]).is_loopback for a in addresses
    )

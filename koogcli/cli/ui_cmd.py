"""`koog ui`: open the page of `koog serve` (SPEC §6 "The page"), starting serve in the
background when nothing answers on its port."""

from __future__ import annotations

import typer

from koogcli.cli.options import globals_of
from koogcli.core.errors import UsageError
from koogcli.ui import render

_WAIT_SECONDS = 30.0


def ui(
    ctx: typer.Context,
    no_open: bool = typer.Option(
        False, "--no-open", help="Print the page's address instead of opening a browser."
    ),
    port: int | None = typer.Option(
        None,
        "--port",
        min=1,
        max=65535,
        metavar="PORT",
        help="serve's port (default [serve] port).",
    ),
) -> None:
    """Open koog's page: every session, memory and why, in a browser.

    Starts `koog serve` in the background when it is not running (its log goes to
    serve.log in the data folder; stop it with the kill command printed).
    """
    given = globals_of(ctx)
    app_ctx = given.build()
    settings = app_ctx.settings.serve
    port = port or settings.port
    host = settings.host if settings.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}/"
    found = _probe(url)
    if found == "other":
        raise UsageError(
            f"something other than koog serve answers on {host}:{port}",
            hint="give another --port (and [serve] port), or stop what uses it",
        )
    if found is None:
        log = app_ctx.data.root / "serve.log"
        flags = [
            *(["--config", given.config] if given.config else []),
            *(["--data-dir", given.data_dir] if given.data_dir else []),
        ]
        pid = _start(flags, port, log)
        render.note(f"started koog serve on {url} (pid {pid}, log {log}); `kill {pid}` stops it")
    if no_open:
        render.out(url)
        return
    if _no_display():
        render.out(url)
        render.note("no display to open a browser on; open the address above")
        return
    import webbrowser

    if not webbrowser.open(url):
        render.out(url)
        render.note("no browser was found to open it; open the address above")


def _no_display() -> bool:
    """Linux and the BSDs without X or Wayland: a browser could only be a text one, run in
    this terminal (macOS and Windows always have one to open)."""
    import os
    import sys

    if sys.platform == "darwin" or sys.platform.startswith("win"):
        return False
    return not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _probe(url: str) -> str | None:
    """ "koog" when koog serve answers there, "other" when something else does, None when
    nothing listens."""
    import json
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url + "healthz", timeout=2) as answer:
            said = json.loads(answer.read(1000) or b"null")
    except urllib.error.HTTPError:
        return "other"
    except (OSError, ValueError):
        return None if _refused(url) else "other"
    return "koog" if isinstance(said, dict) and said.get("status") == "ok" else "other"


def _refused(url: str) -> bool:
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), 1):
            return False
    except OSError:
        return True


def _start(flags: list[str], port: int, log_path: object) -> int:
    """`koog serve --port PORT` in its own session (it outlives this command), once it
    answers."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    log = Path(str(log_path))
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "koogcli", *flags, "serve", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + _WAIT_SECONDS
    while time.monotonic() < deadline:
        if child.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-2:]
            raise UsageError(
                "koog serve did not start: " + (" ".join(tail) or f"exit {child.returncode}"),
                hint=f"its log: {log}",
            )
        if _probe(url) == "koog":
            return child.pid
        time.sleep(0.1)
    child.terminate()
    raise UsageError(
        f"koog serve did not answer within {_WAIT_SECONDS:g} s", hint=f"its log: {log}"
    )

"""A real PostgreSQL 16 with pgvector for the tests, from the `pgserver` wheel's binaries.

The server runs in a temp dir on a free loopback port, without a Unix socket, with fsync
off (a test database need not survive a power cut). PostgreSQL refuses to run as root, so
under root (CI) its files are copied where any user can read them and it runs as `nobody`.
`pgserver` is used for its binaries only: its own launcher creates system users and
changes permissions up the directory tree.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

USER = "koog"


@dataclass
class PgServer:
    root: Path
    port: int
    run_as: str | None

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        _run(
            [
                str(self.root / "pg" / "bin" / "pg_ctl"),
                "-D",
                str(self.root / "data"),
                "-m",
                "immediate",
                "stop",
            ],
            self.run_as,
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def _install() -> Path:
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the pgserver wheel is not installed (pip install '.[test]')")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(command: list[str], user: str | None, check: bool = True) -> str:
    done = subprocess.run(
        command,
        user=user,
        group="nogroup" if user else None,
        extra_groups=[] if user else None,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"{Path(command[0]).name} failed: {done.stderr.strip()[-500:]}")
    return done.stdout


def start() -> PgServer:
    """initdb and start; raises RuntimeError saying why when the server cannot start."""
    install = _install()
    root = Path(tempfile.mkdtemp(prefix="koog-pg-"))
    run_as = "nobody" if os.geteuid() == 0 else None
    pg = root / "pg"
    if run_as:  # binaries where `nobody` can reach them, whatever the checkout's permissions
        # The layout the binaries' RPATH expects: pgserver/pginstall/bin and pgserver.libs.
        copy = root / "site" / "pgserver" / "pginstall"
        for part in ("bin", "lib", "share"):
            shutil.copytree(install / part, copy / part, symlinks=True)
        libs = install.parent.parent / "pgserver.libs"
        if libs.is_dir():
            shutil.copytree(libs, root / "site" / "pgserver.libs", symlinks=True)
        pg.symlink_to(copy)
        os.chmod(root, 0o755)
        shutil.chown(root, user=run_as)
    else:
        pg.symlink_to(install)
    data = root / "data"
    _run(
        [
            str(pg / "bin" / "initdb"),
            "-D",
            str(data),
            "-U",
            USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
            "--no-instructions",
        ],
        run_as,
    )
    port = _free_port()
    options = (
        f"-p {port} -k '' -c listen_addresses=127.0.0.1 -c fsync=off "
        "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    _run(
        [
            str(pg / "bin" / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(root / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
        ],
        run_as,
    )
    return PgServer(root, port, run_as)

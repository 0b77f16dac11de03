"""Start koog processes in milliseconds for the tests that kill dozens of them.

A zygote process imports koog and the openai SDK once, then forks a child per request;
each child sets its own environment, working dir and standard streams and runs koog's
real `main()`, so it is a koog process like any other (its own pid, files and sockets,
killed by a real SIGKILL), minus the second of imports a fresh interpreter pays. The
crash tests spend their time on what they test, and their kills land in the turn rather
than in start-up.

Protocol: one JSON request per line on the zygote's stdin, one JSON answer per line.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _status(code: int) -> int:
    """A waitpid status as Popen's returncode (-N for signal N)."""
    return -os.WTERMSIG(code) if os.WIFSIGNALED(code) else os.WEXITSTATUS(code)


def _child(request: dict[str, Any]) -> None:
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, name, flags in (
            (0, request.get("stdin"), os.O_RDONLY),
            (1, request.get("stdout"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
            (2, request.get("stderr"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        ):
            opened = os.open(name or os.devnull, flags, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.argv = ["koog", *request["args"]]
        from koogcli.cli.app import main

        main()  # leaves with os._exit
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os._exit(code)


def serve() -> None:
    import koogcli.adapters.model.chat_upstream
    import koogcli.cli.app
    import koogcli.services.turn  # noqa: F401

    done: dict[int, int] = {}
    out = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        if op == "spawn":
            out.flush()
            pid = os.fork()
            if pid == 0:
                _child(request)
            answer: dict[str, Any] = {"pid": pid}
        else:
            pid = request["pid"]
            if pid not in done:
                deadline = time.monotonic() + (request.get("timeout") or 0)
                while True:
                    found, code = os.waitpid(pid, os.WNOHANG)
                    if found:
                        done[pid] = _status(code)
                        break
                    if op == "poll" or time.monotonic() >= deadline:
                        break
                    time.sleep(0.002)
            answer = {"status": done.get(pid)}
        out.write(json.dumps(answer) + "\n")
        out.flush()


class Zygote:
    def __init__(self) -> None:
        root = str(Path(__file__).resolve().parents[2])
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tests.support import zygote; zygote.serve()"],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, **request: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return answer

    def spawn(
        self,
        *args: str,
        env: dict[str, str],
        stdin: Path | None = None,
        stdout: Path | None = None,
        stderr: Path | None = None,
    ) -> ForkedKoog:
        answer = self.ask(
            op="spawn",
            args=list(args),
            env=env,
            cwd=os.getcwd(),
            stdin=str(stdin) if stdin else None,
            stdout=str(stdout) if stdout else None,
            stderr=str(stderr) if stderr else None,
        )
        return ForkedKoog(self, int(answer["pid"]))

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


class ForkedKoog:
    """The part of subprocess.Popen the kill tests use."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.ask(op="poll", pid=self.pid)["status"]
        return self.returncode

    def wait(self, timeout: float = 30) -> int:
        if self.returncode is None:
            self.returncode = self.zygote.ask(op="wait", pid=self.pid, timeout=timeout)["status"]
        if self.returncode is None:
            raise subprocess.TimeoutExpired(["koog"], timeout)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

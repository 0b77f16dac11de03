"""A real `koog serve` process for tests: started on a free port, stopped or killed."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import IO, Any

import openai

from tests.conftest import API_KEY, KOOG_BIN

_LINE = re.compile(r"koog serve: (http://\S+/v1)")


class KoogServe:
    def __init__(self, env: dict[str, str], *args: str, log: Path | None = None) -> None:
        self.env = env
        self.args = args
        self.log_path = log
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self._log: IO[str] | None = None

    def start(self, timeout: float = 30) -> KoogServe:
        self._log = open(self.log_path, "a") if self.log_path else None  # noqa: SIM115
        self.proc = subprocess.Popen(
            [KOOG_BIN, "serve", "--port", "0", *self.args],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log or subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = self.proc.stdout.readline()
        found = _LINE.search(line)
        if found is None or time.monotonic() > deadline:
            self.proc.kill()
            raise RuntimeError(f"koog serve did not start: {line!r}")
        self.url = found.group(1)
        self.start_line = line
        return self

    def client(self, **kwargs: object) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url, api_key="client-key", max_retries=0, **kwargs)  # type: ignore[arg-type]

    def async_client(self, **kwargs: object) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.url, api_key="client-key", max_retries=0, **kwargs)  # type: ignore[arg-type]

    def stop(self, timeout: float = 30) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        if self._log:
            self._log.close()
        return code

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        if self._log:
            self._log.close()


__all__ = ["API_KEY", "KoogServe", "http"]


def http(
    method: str,
    url: str,
    body: object = None,
    headers: dict[str, str] | None = None,
    content: bytes | None = None,
) -> tuple[int, Any]:
    """One plain HTTP request (stdlib): the status and the JSON body."""
    import json
    import urllib.error
    import urllib.request

    data = content if content is not None else (None if body is None else json.dumps(body).encode())
    sent = {"Content-Type": "application/json", **(headers or {})} if data is not None else headers
    request = urllib.request.Request(url, data=data, method=method, headers=sent or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def as_another_user(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`code` run by the system's python3 as the local user `nobody` (the test is skipped
    where that cannot be done: CI runs as root and has both)."""
    import os
    import shutil

    import pytest

    python = shutil.which("python3", path="/usr/bin:/bin")
    if os.geteuid() != 0 or python is None:
        pytest.skip("acting as another user needs root and a system python3 (CI has both)")
    return subprocess.run(
        [python, "-c", code, *args],
        user="nobody",
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )

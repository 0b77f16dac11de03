"""Probes of `koog serve`'s bounds (SPEC §6 "Bounds"), shared by the slow tests and
`bench/serve_limits.py`: a huge body, a burst on one session beside another session's
request, and connections that never finish their request head. Plain sockets and
`http.client` only, every loop bounded in count and time, 127.0.0.1 only."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.client import HTTPConnection
from urllib.parse import urlsplit


def _where(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set so far (VmHWM)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


@dataclass(frozen=True)
class BigBody:
    status: int
    seconds: float
    sent_mib: float


def big_body(url: str, size: int, chunked: bool = False) -> BigBody:
    """POST a body of `size` bytes, sent as fast as the socket takes it, until the server
    answers: its status, how long the answer took and how much was sent by then."""
    host, port = _where(url)
    sock = socket.create_connection((host, port), timeout=30)
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Content-Type: application/json\r\nX-Koog-Session: big\r\n"
        + ("Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {size}\r\n")
        + "\r\n"
    )
    start = time.perf_counter()
    sock.sendall(head.encode())
    sent = [0]
    stop = threading.Event()

    def pour() -> None:
        piece = b'{"messages": [{"role": "user", "content": "' + b"x" * (1 << 20)
        try:
            while sent[0] < size and not stop.is_set():
                data = piece if not chunked else b"%x\r\n%s\r\n" % (len(piece), piece)
                sock.sendall(data)
                sent[0] += len(piece)
        except OSError:
            pass  # the server answered and closed: what the probe expects

    writer = threading.Thread(target=pour, daemon=True)
    writer.start()
    answer = b""
    try:
        while b"\r\n" not in answer:
            more = sock.recv(4096)
            if not more:
                break
            answer += more
    except OSError:
        pass
    seconds = time.perf_counter() - start
    stop.set()
    sock.close()
    writer.join(5)
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0
    return BigBody(status, seconds, sent[0] / (1 << 20))


def turn_seconds(url: str, session: str | None, text: str) -> tuple[int, float]:
    """One chat completion on `session` (None: stateless): its status and wall time."""
    host, port = _where(url)
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]})
    start = time.perf_counter()
    conn = HTTPConnection(host, port, timeout=120)
    try:
        conn.request(
            "POST",
            "/v1/chat/completions",
            body,
            {
                "Content-Type": "application/json",
                **({"X-Koog-Session": session} if session else {}),
            },
        )
        answer = conn.getresponse()
        answer.read()
        return answer.status, time.perf_counter() - start
    finally:
        conn.close()


@dataclass(frozen=True)
class Burst:
    usual: float  # another session's request on a quiet server, seconds
    during: float  # the same while the burst waits on its session
    statuses: dict[int, int]  # the burst's answers: status → count


def burst(
    url: str,
    count: int,
    hold: float,
    delayed: Callable[[], object],
    on: str | None = "busy",
    word: str = "burst",
) -> Burst:
    """`count` requests at once on session `on` (None: stateless, each its own), saying
    `word` and their number, whose answers the upstream holds for `hold` seconds
    (`delayed()` scripts that), and meanwhile one request on another session: how long it
    takes, against its usual time."""
    usual = min(turn_seconds(url, f"quiet-{i}", "hello")[1] for i in range(3))
    delayed()
    with ThreadPoolExecutor(count) as pool:
        futures = [pool.submit(turn_seconds, url, on, f"{word} {i}") for i in range(count)]
        time.sleep(min(0.5, hold / 3))  # the burst has arrived and waits
        status, during = turn_seconds(url, "other", "are you there")
        assert status == 200, status
        statuses: dict[int, int] = {}
        for future in futures:
            code = future.result()[0]
            statuses[code] = statuses.get(code, 0) + 1
    return Burst(usual, during, statuses)


def compaction_status(url: str, text: str) -> int:
    """One Codex remote compaction (`POST /v1/responses/compact`, stateless): its status."""
    host, port = _where(url)
    body = json.dumps({"model": "gpt-5-codex", "input": [{"role": "user", "content": text}]})
    conn = HTTPConnection(host, port, timeout=120)
    try:
        conn.request("POST", "/v1/responses/compact", body, {"Content-Type": "application/json"})
        answer = conn.getresponse()
        answer.read()
        return answer.status
    finally:
        conn.close()


def crowd(url: str, count: int, delayed: Callable[[], object], wait: float = 1.0) -> Burst:
    """`count` Codex compactions and `count` requests on as many new sessions at once, their
    answers held upstream (`delayed()` scripts that), and meanwhile one request on another
    session: how long it takes, against its usual time."""
    usual = min(turn_seconds(url, f"quiet-{i}", "hello")[1] for i in range(3))
    delayed()
    sends: list[Callable[[], int]] = [
        *(lambda i=i: compaction_status(url, f"burst compact {i}") for i in range(count)),
        *(lambda i=i: turn_seconds(url, f"crowd-{i}", f"burst {i}")[0] for i in range(count)),
    ]
    with ThreadPoolExecutor(len(sends)) as pool:
        futures = [pool.submit(send) for send in sends]
        time.sleep(wait)  # the burst has arrived and waits upstream
        status, during = turn_seconds(url, "other", "are you there")
        assert status == 200, status
        statuses: dict[int, int] = {}
        for future in futures:
            code = future.result()
            statuses[code] = statuses.get(code, 0) + 1
    return Burst(usual, during, statuses)


def half_sent(url: str, count: int, wait: float) -> tuple[int, int]:
    """Open `count` connections that each send half a request line and stop; after
    `wait` seconds, how many the server has closed, of how many it accepted."""
    host, port = _where(url)
    socks = []
    for _ in range(count):
        sock = socket.create_connection((host, port), timeout=10)
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-")
        socks.append(sock)
    deadline = time.monotonic() + wait
    closed = 0
    for sock in socks:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if sock.recv(1) == b"":
                closed += 1
        except TimeoutError:
            pass
        except OSError:
            closed += 1  # reset: closed too
        sock.close()
    return closed, len(socks)

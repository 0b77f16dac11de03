"""What `koog serve` costs per request: CPU in the steady state and the latency it adds,
for chat completions, the Responses API and Anthropic Messages, at 1 and 10 streams.

    python bench/serve.py [--turns 20] [--warmup 3] [--streams 1,10] [--delay 0.05]
                          [--protocols chat,responses,messages] [--long 5000]
                          [--peer litellm] [--passthrough] [--against DIR [--rounds 5]]

The upstream is the local test server (its own process, as a real one would be) answering
after `--delay` seconds with a few words, word by word. Each stream is a client with its
own session resending its growing conversation, as clients do; every request through koog
is paired with the same conversation sent straight to the upstream's chat completions,
alternating which goes first, so noise falls on both alike. Requests are read to the end
by a plain HTTP client (`http.client`): the load generator shares this machine's cores.

CPU per request is koog serve's user + system CPU over the measured requests only (after
`--warmup` turns a stream), divided by their number: the steady state, without start-up.
`--long N` also measures a session that already holds N messages against one of 10 (chat
completions, one stream, the client resending it all). `--peer litellm` runs the LiteLLM
proxy (when installed) on the same upstream and prints the ratios. `--passthrough` also
measures Messages and Responses requests passed through to an upstream of their own
protocol (`[llm] wire_api`), each by a koog serve of its own. `--against DIR` (with
`--long`) runs a koog serve from another checkout's `koogcli` beside this one and measures
both at 10 and N messages in alternation, medians of `--rounds` (a change against main).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from common import KOOG, PYTHON, ROOT, clean_env

Convo = list[dict[str, str]]


def _chat_body(convo: Convo) -> dict[str, object]:
    return {"model": "gpt-4o-mini", "messages": convo, "stream": True}


def _responses_body(convo: Convo) -> dict[str, object]:
    return {"model": "gpt-4o-mini", "input": convo, "stream": True, "store": False}


def _messages_body(convo: Convo) -> dict[str, object]:
    return {"model": "gpt-4o-mini", "max_tokens": 256, "messages": convo, "stream": True}


def _chat_text(event: dict[str, object]) -> str:
    return "".join(
        (c.get("delta") or {}).get("content") or ""
        for c in event.get("choices", [])  # type: ignore[union-attr]
    )


def _responses_text(event: dict[str, object]) -> str:
    return str(event.get("delta", "")) if event.get("type") == "response.output_text.delta" else ""


def _messages_text(event: dict[str, object]) -> str:
    if event.get("type") != "content_block_delta":
        return ""
    return str((event.get("delta") or {}).get("text", ""))  # type: ignore[union-attr]


PROTOCOLS: dict[str, tuple[str, Callable[[Convo], dict[str, object]], Callable[..., str]]] = {
    "chat": ("/chat/completions", _chat_body, _chat_text),
    "responses": ("/responses", _responses_body, _responses_text),
    "messages": ("/messages", _messages_body, _messages_text),
}


def _timed(base: str, protocol: str, convo: Convo, headers: dict[str, str]) -> float:
    """One streamed request read to its end; the reply joins the conversation."""
    path, body_of, text_of = PROTOCOLS[protocol]
    parts = urlsplit(base)
    body = json.dumps(body_of(convo))
    start = time.perf_counter()
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    conn.request(
        "POST",
        parts.path + path,
        body,
        {"Content-Type": "application/json", "Authorization": "Bearer b", **headers},
    )
    answer = conn.getresponse()
    text = []
    for line in answer:
        if line.startswith(b"data: {"):
            text.append(text_of(json.loads(line[6:])))
    elapsed = time.perf_counter() - start
    conn.close()
    if answer.status != 200:
        raise SystemExit(f"{base}{path} answered {answer.status}")
    convo.append({"role": "assistant", "content": "".join(text)})
    return elapsed


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its reaped children so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _cpu_of_tree(pid: int) -> float:
    """A server and its worker processes (`--workers`)."""
    total = _cpu_seconds(pid)
    children = Path(f"/proc/{pid}/task/{pid}/children")
    for child in children.read_text().split() if children.exists() else []:
        total += _cpu_of_tree(int(child))
    return total


class Result:
    def __init__(self) -> None:
        self.direct: list[float] = []
        self.through: list[float] = []
        self.cpu = 0.0

    @property
    def added_ms(self) -> float:
        return (
            statistics.median(b - a for a, b in zip(self.direct, self.through, strict=True)) * 1000
        )

    @property
    def cpu_ms(self) -> float:
        return self.cpu / len(self.through) * 1000


def measure(
    server: tuple[str, int],
    upstream: str,
    protocol: str,
    streams: int,
    turns: int,
    warmup: int,
    label: str,
    seeded: Callable[[int], Convo] | None = None,
) -> Result:
    """`streams` clients at once, each `warmup` + `turns` paired requests; CPU counted
    from when every client has warmed up."""
    base, pid = server
    result = Result()
    lock = threading.Lock()
    warmed = threading.Barrier(streams + 1)
    measured = threading.Barrier(streams + 1)

    def client(index: int) -> None:
        mine: Convo = seeded(index) if seeded else []
        theirs: Convo = [dict(m) for m in mine]
        session = {"X-Koog-Session": f"{label}-{index}"}
        for n in range(warmup + turns):
            if n == warmup:
                warmed.wait()
            for convo in (mine, theirs):
                convo.append({"role": "user", "content": f"question {n} from {index}"})
            order = [(upstream, "chat", mine, {}), (base, protocol, theirs, session)]
            if (n + index) % 2:
                order.reverse()
            times = {url: _timed(url, p, convo, h) for url, p, convo, h in order}
            if n >= warmup:
                with lock:
                    result.direct.append(times[upstream])
                    result.through.append(times[base])
        measured.wait()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(streams)]
    for t in threads:
        t.start()
    warmed.wait()
    before = _cpu_of_tree(pid)
    measured.wait()
    result.cpu = _cpu_of_tree(pid) - before
    for t in threads:
        t.join()
    return result


def _start(argv: list[str], env: dict[str, str], pattern: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert process.stdout is not None
    found = re.search(pattern, process.stdout.readline())
    if found is None:
        process.kill()
        raise SystemExit(f"{argv[0]} did not start")
    return process, found.group(1)


def _litellm(
    upstream: str, env: dict[str, str], folder: Path
) -> tuple[subprocess.Popen[str], str] | None:
    """The LiteLLM proxy on the same upstream, when installed."""
    binary = shutil.which("litellm")
    if binary is None:
        print("--peer litellm: litellm is not installed (pip install 'litellm[proxy]'); skipped")
        return None
    config = folder / "litellm.yaml"
    config.write_text(
        "model_list:\n  - model_name: gpt-4o-mini\n    litellm_params:\n"
        f"      model: openai/gpt-4o-mini\n      api_base: {upstream}\n      api_key: bench\n"
    )
    port = 4000 + os.getpid() % 1000
    # A local benchmark: no master key (newer versions refuse to start without one).
    env = {**env, "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true"}
    process = subprocess.Popen(
        [binary, "--config", str(config), "--port", str(port), "--host", "127.0.0.1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            http.client.HTTPConnection("127.0.0.1", port, timeout=2).request("GET", "/health")
            return process, f"http://127.0.0.1:{port}/v1"  # type: ignore[return-value]
        except OSError:
            time.sleep(0.5)
    process.kill()
    print("--peer litellm: the proxy did not start in 120 s; skipped")
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--streams", default="1,10")
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--protocols", default="chat,responses,messages")
    parser.add_argument("--long", type=int, default=0, help="also a session of N messages")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--peer", choices=["litellm"], default=None)
    parser.add_argument("--passthrough", action="store_true")
    parser.add_argument(
        "--against",
        metavar="DIR",
        help="with --long: also a koog serve from another checkout (its koogcli), measured "
        "in alternation with this one, medians of --rounds",
    )
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    upstream_process, upstream = _start(
        [PYTHON, "-m", "tests.fakes.openai_server", "--port", "0", "--delay", str(args.delay)],
        os.environ.copy(),
        r"(http://\S+)",
    )
    with tempfile.TemporaryDirectory() as tmp:
        env = clean_env(Path(tmp) / "data", OPENAI_BASE_URL=upstream)
        env.update(OPENAI_API_KEY="bench", KOOG_MODEL="gpt-4o-mini")
        argv = [KOOG, "serve", "--port", "0"]
        if args.workers > 1:
            argv += ["--workers", str(args.workers)]
        server, base = _start(argv, env, r"(http://\S+/v1)")
        peer = _litellm(upstream, os.environ.copy(), Path(tmp)) if args.peer else None
        print(
            f"upstream delay {args.delay}s, {args.turns} measured turns a stream after "
            f"{args.warmup} warm-up turns; CPU is koog serve's, per request, steady state"
        )
        print(f"{'protocol':10} {'streams':>7} {'CPU ms':>7} {'added ms':>9}   (peer: CPU, added)")
        try:
            for protocol in args.protocols.split(","):
                for streams in map(int, args.streams.split(",")):
                    label = f"{protocol}{streams}"
                    got = measure(
                        (base, server.pid),
                        upstream,
                        protocol,
                        streams,
                        args.turns,
                        args.warmup,
                        label,
                    )
                    line = f"{protocol:10} {streams:7} {got.cpu_ms:7.2f} {got.added_ms:9.1f}"
                    if peer is not None and protocol == "chat":
                        other = measure(
                            (peer[1], peer[0].pid),
                            upstream,
                            protocol,
                            streams,
                            args.turns,
                            args.warmup,
                            "peer" + label,
                        )
                        line += (
                            f"   litellm {other.cpu_ms:7.2f} {other.added_ms:7.1f}"
                            f"   koog/litellm CPU {got.cpu_ms / other.cpu_ms:.2f}x"
                        )
                    print(line, flush=True)
            if args.long and args.against:
                _long_against(args, (base, server.pid), env, upstream)
            elif args.long:
                _long(args, (base, server.pid), upstream)
            if args.passthrough:
                _passed_through(args, env, Path(tmp), upstream)
        finally:
            server.terminate()
            server.wait(30)
            if peer is not None:
                peer[0].terminate()
                peer[0].wait(30)
    upstream_process.terminate()


def _passed_through(
    args: argparse.Namespace, env: dict[str, str], tmp: Path, upstream: str
) -> None:
    """Messages to a Messages upstream, Responses to a Responses one: the client's body
    goes upstream as it came (issue 43)."""
    for wire in ("messages", "responses"):
        config = tmp / f"{wire}.toml"
        config.write_text(f'[llm]\nwire_api = "{wire}"\n')
        native = {**env, "KOOG_CONFIG": str(config), "ANTHROPIC_API_KEY": "bench"}
        process, base = _start([KOOG, "serve", "--port", "0"], native, r"(http://\S+/v1)")
        try:
            for streams in map(int, args.streams.split(",")):
                got = measure(
                    (base, process.pid),
                    upstream,
                    wire,
                    streams,
                    args.turns,
                    args.warmup,
                    f"pass-{wire}{streams}",
                )
                shown = f"{wire}>{wire}"
                print(f"{shown:20} {streams:7} {got.cpu_ms:7.2f} {got.added_ms:9.1f}", flush=True)
        finally:
            process.terminate()
            process.wait(30)


def _seeded(size: int) -> Callable[[int], Convo]:
    def convo(index: int) -> Convo:
        return [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"message {i} of {index}",
            }
            for i in range(size)
        ]

    return convo


def _long_against(
    args: argparse.Namespace, server: tuple[str, int], env: dict[str, str], upstream: str
) -> None:
    """This checkout's koog serve and another's (`--against`), each with its own data,
    measured in turns (which goes first alternates), at 10 and `--long` messages."""
    source = str(Path(args.against).resolve())
    code = f"import sys; sys.path.insert(0, {source!r}); from koogcli.cli.app import main; main()"
    other_env = {**env, "KOOG_DATA_DIR": env["KOOG_DATA_DIR"] + "-against"}
    other, other_base = _start(
        [PYTHON, "-c", code, "serve", "--port", "0"], other_env, r"(http://\S+/v1)"
    )
    servers = {"this": server, "against": (other_base, other.pid)}
    figures: dict[tuple[str, int], list[float]] = {}
    try:
        for round_ in range(args.rounds):
            order = list(servers) if round_ % 2 == 0 else list(reversed(servers))
            for size in (10, args.long):
                for name in order:
                    label = f"{name}-{size}-{round_}"
                    got = measure(
                        servers[name],
                        upstream,
                        "chat",
                        1,
                        args.turns,
                        args.warmup,
                        label,
                        _seeded(size),
                    )
                    figures.setdefault((name, size), []).append(got.cpu_ms)
    finally:
        other.terminate()
        other.wait(30)
    print(f"CPU ms a request, medians of {args.rounds} rounds (against {source}):")
    for size in (10, args.long):
        mine = statistics.median(figures[("this", size)])
        theirs = statistics.median(figures[("against", size)])
        print(
            f"  {size:>6,} messages: this {mine:7.2f}  against {theirs:7.2f}  ({mine / theirs:.2f}x)"
        )


def _long(args: argparse.Namespace, server: tuple[str, int], upstream: str) -> None:
    """CPU per request on a session of `--long` messages against one of 10."""
    seeded = _seeded

    short = measure(server, upstream, "chat", 1, args.turns, args.warmup, "short", seeded(10))
    long = measure(server, upstream, "chat", 1, args.turns, args.warmup, "long", seeded(args.long))
    print(
        f"session of 10 messages: {short.cpu_ms:.2f} ms CPU a request; of {args.long:,}: "
        f"{long.cpu_ms:.2f} ms ({long.cpu_ms / short.cpu_ms:.2f}x)"
    )


if __name__ == "__main__":
    main()

"""How many prompt tokens a real llama.cpp `llama-server` must read (prefill) for one
conversation, koog against a direct client, side by side in one run (SPEC §5 4a).

    python bench/prefix_cache.py [--turns 12] [--rounds 1] [--only NAME ...]

The server (bench/build_llama_server.sh builds it: llama.cpp's own `llama-server` from the
`llama-cpp-python` sdist, SmolLM2-135M-Instruct) runs with one slot (`-np 1`) and its
Prometheus metrics, so `llamacpp:prompt_tokens_total` counts exactly the tokens it read
again: a request that starts with the previous one costs only its new tokens. Each client
gets a server of its own (started anew: an empty cache) and asks the same questions:

  direct            the openai SDK resending the conversation (what llm -c does)
  koog              one-shot `koog chat -s NAME QUESTION` turns, nothing configured
  koog memory       the same with `[long_term_memory.retrieval] enabled = true` (and the
                    records below added first); the default placement, `after`
  koog memory/system  the same with Koog's `augmenter = "system"` (the old default)
  koog window 8     a `window` preprocessor of 8 (its default step)
  koog window 8/step 1  the same with `step = 1`, Koog's exact rule
  serve memory      `koog serve` with retrieval on, the openai SDK resending through it
  serve window 8    `koog serve` with the window of 8
  serve headerless  `koog serve` with retrieval on, the openai SDK naming no session: nothing
                    is stored, the records come back by the questions' digests

With retrieval, the records themselves are new tokens a direct client never reads; the
table gives them (each question's records once, counted by the server's own tokenizer)
and the ratio without them: what the server read again beyond what was new. Replies are short (max_tokens 120, temperature
0) so the run takes a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import KOOG, ROOT

FACTS = [
    "The harbour ferry to the island leaves at nine every morning.",
    "Ada keeps the lighthouse on the north cape.",
    "Tide tables are posted on the quay beside the harbour office.",
    "The fish market opens at dawn and closes at noon.",
    "The harbour office lends bicycles to visitors.",
    "Boats may moor at the east pier for two nights at most.",
    "The island has one bakery, open from seven.",
    "Storm warnings are flown as red flags on the harbour mast.",
]
QUESTIONS = [
    "When does the ferry to the island leave?",
    "Who keeps the lighthouse?",
    "Where are the tide tables posted?",
    "When does the fish market open?",
    "Can visitors borrow bicycles somewhere?",
    "How long may a boat moor at the east pier?",
    "Is there a bakery on the island?",
    "How are storm warnings shown?",
    "Tell me again about the ferry, briefly.",
    "And the lighthouse keeper's name?",
    "What closes at noon?",
    "Summarise the harbour rules in one sentence.",
]
SYSTEM = "You are a helpful assistant."
MAX_TOKENS = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def built() -> tuple[str, str]:
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "build_llama_server.sh")],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"building llama-server failed:\n{done.stderr[-2000:]}")
    binary, model = done.stdout.split()[-2:]
    return binary, model


class LlamaServer:
    def __init__(self, binary: str, model: str, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [binary, "-m", model, "--host", "127.0.0.1", "--port", str(self.port)]
        args += ["-np", "1", "--metrics", "-c", "8192", "-t", "2"]
        self.process = subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT)
        for _ in range(240):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{self.url}/health", timeout=1)
                return
            time.sleep(0.25)
        raise SystemExit(f"llama-server did not start; see {log}")

    def prefilled(self) -> int:
        text = urllib.request.urlopen(f"{self.url}/metrics", timeout=10).read().decode()
        match = re.search(r"^llamacpp:prompt_tokens_total (\d+(?:\.\d+)?)", text, re.M)
        return int(float(match.group(1))) if match else 0

    def tokens(self, text: str) -> int:
        body = json.dumps({"content": text}).encode()
        request = urllib.request.Request(
            f"{self.url}/tokenize", body, {"Content-Type": "application/json"}
        )
        return len(json.loads(urllib.request.urlopen(request, timeout=10).read())["tokens"])

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


@contextlib.contextmanager
def koog_env(work: Path, server: LlamaServer, config: str) -> Iterator[dict[str, str]]:
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    (work / "koog.toml").write_text(
        f"[llm]\nmax_tokens = {MAX_TOKENS}\ntemperature = 0\ntimeout_seconds = 300\n{config}"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KOOG_"))}
    env.update(
        OPENAI_BASE_URL=f"{server.url}/v1",
        OPENAI_API_KEY="none",
        KOOG_MODEL="smollm2",
        KOOG_DATA_DIR=str(data),
        KOOG_CONFIG=str(work / "koog.toml"),
    )
    yield env


def koog(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [KOOG, *args], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if done.returncode != 0:
        raise SystemExit(f"koog {' '.join(args)} failed: {done.stderr[-600:]}")
    return done.stdout


def add_facts(env: dict[str, str]) -> None:
    for fact in FACTS:
        koog(env, "memory", "add", fact)


def sdk_conversation(base_url: str, turns: int, headers: dict[str, str] | None = None) -> None:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="none", default_headers=headers or {})
    convo: list[dict[str, str]] = [{"role": "system", "content": SYSTEM}]
    for question in QUESTIONS[:turns]:
        convo.append({"role": "user", "content": question})
        done = client.chat.completions.create(
            model="smollm2",
            messages=convo,  # type: ignore[arg-type]
            max_tokens=MAX_TOKENS,
            temperature=0,
        )
        convo.append({"role": "assistant", "content": done.choices[0].message.content or ""})


def one_shots(env: dict[str, str], turns: int) -> None:
    for question in QUESTIONS[:turns]:
        koog(env, "chat", "-s", "bench", question)


@contextlib.contextmanager
def served(env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [KOOG, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(120):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            time.sleep(0.25)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(30)


MEMORY = "[long_term_memory.retrieval]\nenabled = true\n"
WINDOW = '[[chat_memory.preprocessors]]\ntype = "window"\nsize = 8\n'


def run_client(name: str, work: Path, server: LlamaServer, turns: int) -> int:
    """Runs one client's conversation; returns the tokens of the records koog placed."""
    if name == "direct":
        sdk_conversation(f"{server.url}/v1", turns)
        return 0
    config = {
        "koog": "",
        "koog memory": MEMORY,
        "koog memory/system": MEMORY + 'augmenter = "system"\n',
        "koog window 8": WINDOW,
        "koog window 8/step 1": WINDOW + "step = 1\n",
        "serve memory": MEMORY,
        "serve window 8": WINDOW,
        "serve headerless": MEMORY,
    }[name]
    with koog_env(work, server, config) as env:
        if config.startswith(MEMORY):
            add_facts(env)
        if name.startswith("serve"):
            with served(env) as url:
                named = None if name == "serve headerless" else {"X-Koog-Session": "bench"}
                sdk_conversation(url, turns, named)
        else:
            one_shots(env, turns)
        if name == "serve headerless":
            return remembered_tokens(env, server, turns)
        return placed_tokens(env, server) if config.startswith(MEMORY) else 0


def remembered_tokens(env: dict[str, str], server: LlamaServer, turns: int) -> int:
    """The records' own tokens placed after each question of a client that stored nothing:
    the placements the memory store remembers by the questions' digests."""
    from koogcli.core.memory import SearchHit
    from koogcli.core.memory_placement import context_text, digest
    from koogcli.core.messages import user
    from koogcli.services import compose

    ctx = compose.build(env=env)
    keys = [digest(user(q)) for q in QUESTIONS[:turns]]
    known = ctx.long_term_memory.placements("default", keys)
    total = 0
    for key in keys:
        ids = [e["id"] for e in known.get(key, []) if isinstance(e, dict)]
        records = [r for i in ids if (r := ctx.long_term_memory.get(i)) is not None]
        if records:
            hits = [SearchHit(r, 1.0, "keyword") for r in records]
            total += server.tokens("\n\n" + context_text(hits))
    return total


def placed_tokens(env: dict[str, str], server: LlamaServer) -> int:
    """The records' own tokens as koog's `after` placement sent them, once per question
    (read back from the session through koog's own code, counted by the server's
    tokenizer): new tokens a direct client never has. With `system` the records are not
    recorded on the messages; the why record of each reply names them instead."""
    from koogcli.core import why as why_core
    from koogcli.core.memory import SearchHit
    from koogcli.core.memory_placement import context_text, placed
    from koogcli.core.names import SessionName
    from koogcli.services import compose

    ctx = compose.build(env=env)
    messages = ctx.history.read(SessionName("bench")).messages
    marked = any(placed(m) for m in messages)
    total = 0
    for m in messages:
        ids = [rid for rid, _, _ in placed(m)]
        why = m.meta.get(why_core.KEY)
        if not marked and m.role == "assistant" and isinstance(why, dict):
            memory = why.get("memory") or {}
            ids = [r["id"] for r in memory.get("records", [])]
        records = [r for i in ids if (r := ctx.long_term_memory.get(i)) is not None]
        if records:
            hits = [SearchHit(r, 1.0, "keyword") for r in records]
            total += server.tokens("\n\n" + context_text(hits))
    return total


CLIENTS = [
    "direct",
    "koog",
    "koog memory",
    "koog memory/system",
    "koog window 8",
    "koog window 8/step 1",
    "serve memory",
    "serve window 8",
    "serve headerless",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=1, help="runs of each client (median)")
    parser.add_argument("--only", nargs="*", default=None, help="these clients (and direct)")
    args = parser.parse_args()
    chosen = [c for c in CLIENTS if args.only is None or c in args.only or c == "direct"]
    binary, model = built()
    results: dict[str, list[int]] = {c: [] for c in chosen}
    records: dict[str, list[int]] = {c: [] for c in chosen}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for round_number in range(args.rounds):
            # Alternating order each round, so a drifting machine favours no client.
            order = chosen if round_number % 2 == 0 else list(reversed(chosen))
            for name in order:
                server = LlamaServer(binary, model, work / "llama.log")
                try:
                    before = server.prefilled()
                    started = time.perf_counter()
                    records[name].append(run_client(name, work, server, args.turns))
                    results[name].append(server.prefilled() - before)
                    print(
                        f"  {name}: {results[name][-1]} tokens "
                        f"({time.perf_counter() - started:.0f} s)",
                        file=sys.stderr,
                    )
                finally:
                    server.stop()
    direct = statistics.median(results["direct"])
    print(f"\n{args.turns} turns, tokens llama-server prefilled (median of {args.rounds}):\n")
    print(
        "| client | tokens prefilled | vs direct | records' own tokens | vs direct, records aside |"
    )
    print("|---|---|---|---|---|")
    for name in chosen:
        value = statistics.median(results[name])
        own = statistics.median(records[name])
        aside = f"{(value - own) / direct:.2f}" if own else ""
        print(f"| {name} | {value:,.0f} | {value / direct:.2f} | {own:,.0f} | {aside} |")


if __name__ == "__main__":
    main()

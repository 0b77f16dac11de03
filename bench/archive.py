"""The archive's speed (issue 54): a Claude Code tree of 1,000 sessions (168 MB, 100,000
messages, each line in Claude Code's own shape: a prompt, an attachment, a reply's thinking and tool call
as two lines sharing a message id, the tool's result, the reply's text) imported by
`koog history import --from claude-code`; the same command again on the unchanged tree;
`koog history search WORD` over what was imported, as whole commands.

    python bench/archive.py [--sessions 1000] [--runs 5] [--backend files|postgresql]

Goals: the import at 20 MB/s or more, the unchanged re-run within 2 s, the search within
100 ms. With `--backend postgresql` a local server is started (tests/support/pg_server).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from common import KOOG, clean_env

EXCHANGES = 25  # per session: 4 messages each (prompt, call, result, reply)
FILLER = (
    "The deploy pipeline builds the image, runs the migrations and then shifts traffic in "
    "steps of ten percent while the error budget holds; a rollback restores the previous "
    "image and the schema stays forward compatible for one release. "
)


def _line(**fields: object) -> str:
    return json.dumps(fields, separators=(",", ":"))


def write_tree(root: Path, sessions: int) -> int:
    """The tree under `root/projects`; its size in bytes."""
    total = 0
    for s in range(sessions):
        sid = str(uuid.UUID(int=s + 1))
        folder = root / "projects" / f"-work-project-{s % 40}"
        folder.mkdir(parents=True, exist_ok=True)
        common = {
            "isSidechain": False,
            "userType": "external",
            "cwd": f"/work/project-{s % 40}",
            "sessionId": sid,
            "version": "2.1.197",
            "gitBranch": "main",
        }
        lines, parent = [], None
        for e in range(EXCHANGES):
            stamp = f"2026-11-{1 + s % 28:02d}T10:{e:02d}:00.000Z"
            ids = [f"{sid[:8]}-{e:04d}-{k}" for k in range(5)]
            word = f"topic{s}x{e}"
            prompt = f"question {e} of session {s} about {word}: " + FILLER[: 120 + e * 3]
            lines.append(
                _line(
                    parentUuid=parent,
                    type="user",
                    uuid=ids[0],
                    timestamp=stamp,
                    message={"role": "user", "content": prompt},
                    **common,
                )
            )
            # What Claude Code attaches to a prompt (a listing of skills, agents, files).
            listing = {"type": "skill_listing", "content": FILLER * 6}
            lines.append(
                _line(
                    parentUuid=ids[0],
                    type="attachment",
                    uuid=ids[0] + "-a",
                    timestamp=stamp,
                    attachment=listing,
                    **common,
                )
            )
            reply = {
                "id": f"msg_{ids[1]}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-5",
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 1200 + e, "output_tokens": 80},
            }
            thinking = [
                {
                    "type": "thinking",
                    "thinking": "Reading the file first. " * 16,
                    "signature": "c2lnbmF0dXJl" * 20,
                }
            ]
            lines.append(
                _line(
                    parentUuid=ids[0] + "-a",
                    type="assistant",
                    uuid=ids[1],
                    timestamp=stamp,
                    message={**reply, "content": thinking},
                    **common,
                )
            )
            call = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{ids[2]}",
                    "name": "Read",
                    "input": {"file_path": f"/work/project-{s % 40}/src/deploy_{e}.py"},
                }
            ]
            lines.append(
                _line(
                    parentUuid=ids[1],
                    type="assistant",
                    uuid=ids[2],
                    timestamp=stamp,
                    message={**reply, "content": call},
                    **common,
                )
            )
            result = [
                {"type": "tool_result", "tool_use_id": f"toolu_{ids[2]}", "content": FILLER * 6}
            ]
            lines.append(
                _line(
                    parentUuid=ids[2],
                    type="user",
                    uuid=ids[3],
                    timestamp=stamp,
                    message={"role": "user", "content": result},
                    toolUseResult={"stdout": FILLER, "stderr": ""},
                    **common,
                )
            )
            answer = [{"type": "text", "text": f"About {word}: " + FILLER}]
            lines.append(
                _line(
                    parentUuid=ids[3],
                    type="assistant",
                    uuid=ids[4],
                    timestamp=stamp,
                    message={**reply, "id": f"msg_{ids[4]}", "content": answer},
                    **common,
                )
            )
            parent = ids[4]
        text = "\n".join(lines) + "\n"
        (folder / f"{sid}.jsonl").write_text(text)
        total += len(text.encode())
    return total


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stderr[-600:]}")
    return seconds, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--backend", choices=["files", "postgresql"], default="files")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="koog-archive-") as tmp:
        work = Path(tmp)
        size = write_tree(work / "claude", args.sessions)
        env = clean_env(work / "data")
        server = None
        if args.backend == "postgresql":
            import sys

            sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
            from tests.support import pg_server

            server = pg_server.start()
            env["KOOG_DATABASE_URL"] = server.url
        try:
            figures = _measure(args, work, env)
        finally:
            if server is not None:
                server.stop()
    _report(args, size, *figures)


def _measure(
    args: argparse.Namespace, work: Path, env: dict[str, str]
) -> tuple[list[float], dict[str, object], list[float], str, int, list[float], list[float]]:
    """Imports, the last import's report, re-runs, the word, hits, searches, `--version`s."""
    argv = [KOOG, "history", "import", "--from", "claude-code", str(work / "claude"), "--json"]
    imports, report = [], {}
    for run in range(args.runs):  # each into an empty data dir (PostgreSQL: a new schema)
        fresh = {**env, "KOOG_DATA_DIR": str(work / f"data-{run}")}
        if args.backend == "postgresql":
            fresh["KOOG_DATABASE_SCHEMA"] = f"archive_{run}_{uuid.uuid4().hex[:8]}"
        seconds, out = _timed(argv, fresh)
        imports.append(seconds)
        report = json.loads(out)
    again = [_timed(argv, fresh)[0] for _ in range(args.runs)]
    word = f"topic{args.sessions // 2}x7"
    search = [KOOG, "history", "search", word, "--json"]
    found = json.loads(_timed(search, fresh)[1])
    searches = [_timed(search, fresh)[0] for _ in range(args.runs)]
    versions = [_timed([KOOG, "--version"], fresh)[0] for _ in range(args.runs)]
    return imports, report, again, word, len(found), searches, versions


def _report(
    args: argparse.Namespace,
    size: int,
    imports: list[float],
    report: dict[str, object],
    again: list[float],
    word: str,
    hits: int,
    searches: list[float],
    versions: list[float],
) -> None:
    mb = size / 1e6
    first = statistics.median(imports)
    print(
        f"tree: {args.sessions} sessions, {mb:.0f} MB, "
        f"{report['messages']} messages imported ({args.backend})"
    )
    print(
        f"import:           {first:7.2f} s  = {mb / first:5.1f} MB/s  median of {args.runs} "
        "(goal >= 20 MB/s)"
    )
    print(
        f"unchanged re-run: {statistics.median(again):7.2f} s  median of {args.runs} (goal <= 2 s)"
    )
    print(
        f"search {word!r}: {statistics.median(searches) * 1000:5.0f} ms median of {args.runs}, "
        f"{hits} hits (goal <= 100 ms); `koog --version` "
        f"{statistics.median(versions) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()

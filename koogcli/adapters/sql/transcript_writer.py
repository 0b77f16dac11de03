"""The transcript of a long import written by a process of its own (the file backend).

Indexing the transcript for search (FTS5's tokenizer) is most of what an import of other
tools' histories costs in one process, which the interpreter's lock keeps to one core; a
child process that only inserts rows puts it on the other. The parent sends each
session's turns as a line of JSON (`[session, [[turn_id, [body, ...]], ...]]`) on the
child's stdin; the child inserts each line in one transaction, answers `"sync"` with
`synced` once all before it is committed, and at the end of its input moves the
write-ahead log into the database (the parent's last writes included) and exits 0 (else 1,
its reason on stderr). A parent killed midway closes the pipe:
what was sent is committed, the rest is not (the archive finds it missing next time).

    python -m koogcli.adapters.sql.transcript_writer DATABASE BUSY_TIMEOUT
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import orjson

from koogcli.adapters.atomic import json_text
from koogcli.core.errors import StorageError
from koogcli.core.messages import Message
from koogcli.core.names import SessionName

_INSERT = "INSERT INTO transcript (session, turn_id, body) VALUES (?, ?, ?)"


class BackgroundTranscript:
    """Appends turns through the child; `finish` waits for it to have written them all."""

    def __init__(self, path: Path, busy_timeout: float) -> None:
        self.path = path
        self.proc = subprocess.Popen(
            [sys.executable, "-m", __name__, str(path), str(busy_timeout)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def append_turns(
        self, session: SessionName, turns: Sequence[tuple[str, Sequence[Message]]]
    ) -> None:
        rows = [[turn, [json_text(m.to_dict()) for m in messages]] for turn, messages in turns]
        if not any(bodies for _turn, bodies in rows):
            return
        pipe = self.proc.stdin
        assert pipe is not None
        try:
            pipe.write(orjson.dumps([session.value, rows]) + b"\n")
        except BrokenPipeError:
            self.finish()  # raises with the child's reason
            raise StorageError(f"the transcript writer for {self.path} stopped") from None

    def sync(self) -> None:
        """Returns once the child has written every row sent before."""
        pipe, answer = self.proc.stdin, self.proc.stdout
        assert pipe is not None and answer is not None
        try:
            pipe.write(b'"sync"\n')
            pipe.flush()
        except BrokenPipeError:
            pass
        if answer.readline() != b"synced\n":
            self.finish()  # raises with the child's reason
            raise StorageError(f"the transcript writer for {self.path} stopped")

    def finish(self) -> None:
        _out, err = self.proc.communicate()  # closes its input: the child writes the rest
        if self.proc.returncode != 0:
            why = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no reason given"]
            raise StorageError(f"cannot write the transcript in {self.path}: {why[0]}")


def write_from(stream: IO[bytes], answer: IO[bytes], path: Path, busy_timeout: float) -> None:
    conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = NORMAL")
        for line in stream:
            found = orjson.loads(line)
            if found == "sync":  # every earlier line is committed: say so
                answer.write(b"synced\n")
                answer.flush()
                continue
            session, turns = found
            rows = [(session, turn, body) for turn, bodies in turns for body in bodies]
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_INSERT, rows)
            conn.execute("COMMIT")
        # Its many frames moved into the database now, once: else every later command
        # would check them again when it opens the database (adapters/sql/wal_check.py).
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def main(argv: Sequence[str]) -> int:
    # A Ctrl-C reaches the whole process group: the parent stops and closes the pipe, and
    # what it sent is still written.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        write_from(sys.stdin.buffer, sys.stdout.buffer, Path(argv[0]), float(argv[1]))
    except (sqlite3.Error, ValueError, OSError) as exc:
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""A relay between a real client and `koog serve`: it passes each request on and the
answer back as it comes (chunk by chunk, so streams stay streams), recording what the
client sent and what koog's headers said (the session answered in, the memory used)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


class _Relay(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    target: tuple[str, int]
    seen: list[dict[str, Any]]

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self._relay()

    def do_HEAD(self) -> None:
        self._relay()

    def do_POST(self) -> None:
        self._relay()

    def do_DELETE(self) -> None:
        self._relay()

    def _relay(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        skip = {"host", "content-length", "connection", "accept-encoding"}
        headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
        upstream = HTTPConnection(*self.target, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            self.seen.append(
                {
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": json.loads(body) if body else None,
                    "status": answer.status,
                    "answered": answer.getheader("X-Koog-Session"),
                    "memory": answer.getheader("X-Koog-Memory-Used"),
                }
            )
            self.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in {"transfer-encoding", "content-length", "connection"}:
                    self.send_header(key, value)
            if self.command == "HEAD":
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while piece := answer.read1(65536):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        finally:
            upstream.close()


@contextlib.contextmanager
def relaying(url: str) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """The relay's base URL (with `url`'s path) and its record, while it runs."""
    parts = urlsplit(url)
    seen: list[dict[str, Any]] = []
    handler = type("Relay", (_Relay,), {"target": (parts.hostname, parts.port), "seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{parts.path}", seen
    finally:
        server.shutdown()
        server.server_close()

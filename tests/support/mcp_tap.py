"""A stdio MCP server with a tap on its input, for tests that count calls.

    python -m tests.support.mcp_tap LOG -- COMMAND ARGS...

Starts COMMAND ARGS with the tap's stdin piped through to it, its stdout and stderr
passed straight on, and appends to LOG one JSON line per `tools/call` request it is sent
({"tool": ..., "arguments": ...}) before forwarding it: what the server was asked to do,
each time it was asked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def main() -> None:
    log, command = sys.argv[1], sys.argv[sys.argv.index("--") + 1 :]
    server = subprocess.Popen(command, stdin=subprocess.PIPE)
    assert server.stdin is not None
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict) and message.get("method") == "tools/call":
            params = message.get("params") or {}
            entry = {"tool": params.get("name"), "arguments": params.get("arguments")}
            with open(log, "a") as out:
                out.write(json.dumps(entry) + "\n")
                out.flush()
                os.fsync(out.fileno())
        server.stdin.write(line)
        server.stdin.flush()
    server.stdin.close()
    sys.exit(server.wait())


if __name__ == "__main__":
    main()

"""How koog starts a stdio MCP server so that no server outlives it.

A server is often a launcher of its own (`npx` starts `node`, which may start more), so
killing the process koog started is not enough, and a koog killed by SIGKILL cannot kill
anything. Each server is therefore started through a tiny keeper (`python -c KEEPER`):
the keeper asks Linux for SIGTERM when koog dies (the parent-death signal), starts the
server in a process group of its own, and on SIGTERM (koog gone, or koog closing the
server) kills that whole group and every process descended from it. A descendant that
left the group (`setsid`, a daemon's double fork) is still found: the keeper is a child
subreaper, so such a process, once its parent is gone, becomes the keeper's child. The
server's stdin and stdout are the keeper's, so the MCP SDK talks to the server directly;
the keeper only waits.
"""

from __future__ import annotations

import os
import sys

KEEPER = """
import ctypes, os, signal, sys
parent, argv = int(sys.argv[1]), sys.argv[2:]
child = 0
def descendants():
    kids = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(entry))
    found, todo = [], [os.getpid()]
    while todo:
        for pid in kids.get(todo.pop(), []):
            found.append(pid); todo.append(pid)
    return found
def kill_all():
    if child:
        try: os.killpg(child, signal.SIGKILL)
        except OSError: pass
    for _ in range(3):
        left = descendants()
        if not left: break
        for pid in left:
            try: os.kill(pid, signal.SIGKILL)
            except OSError: pass
def stop(*_):
    kill_all()
    os._exit(143)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, signal.SIG_IGN)
try:
    libc = ctypes.CDLL(None)
    libc.prctl(1, signal.SIGTERM, 0, 0, 0)
    libc.prctl(36, 1, 0, 0, 0)
except (OSError, AttributeError): pass
if os.getppid() != parent: os._exit(1)
child = os.fork()
if child == 0:
    os.setpgid(0, 0)
    try: os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"cannot start {argv[0]}: {exc.strerror}\\n"); os._exit(127)
try: os.setpgid(child, child)
except OSError: pass
_, status = os.waitpid(child, 0)
kill_all()
os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def kept(command: str, args: list[str]) -> tuple[str, list[str]]:
    """The command and arguments that start `command args` under the keeper."""
    if not sys.platform.startswith("linux"):
        return command, list(args)
    return sys.executable, ["-I", "-S", "-c", KEEPER, str(os.getpid()), command, *args]

"""Process-wide switches, made here and nowhere else: the garbage collector, the umask,
and how the process ends. Entered by main() for every command and, around its loop and
each line, by the REPL (cli/chat.py hands it `per_line`). SIGINT during a turn is
services/interrupts.py's: it is per turn and only ever on the main thread."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Iterator
from typing import NoReturn


def one_shot() -> None:
    """A command lives for a second or two and frees nearly everything by reference
    counting; the cyclic collector would only walk the heap again and again as it grows (a
    turn over 50,000 messages spent 0.2 s of CPU in it, a short turn 0.09 s, mostly while
    the openai SDK is imported). What koog creates is private to the user (§4)."""
    gc.disable()
    os.umask(0o077)
    # koog uses no pydantic plugins; without this, pydantic scans every installed
    # package's entry points on first use, a measurable part of start-up.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


class StopAsked:
    """`koog serve`'s SIGINT and SIGTERM noted, never raised, from the moment it says where
    it listens until its own handlers take over: a KeyboardInterrupt raised then can land
    in a destructor and be dropped (one start in about 130 under load), and the server
    would then serve on, deaf to the Ctrl-C its user already pressed."""

    signal: int | None = None

    @classmethod
    def note(cls, sig: int, frame: object) -> None:
        cls.signal = sig

    @classmethod
    def listen(cls) -> None:
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, cls.note)


def die_with(parent: int) -> None:
    """This process is killed when `parent` dies, even by kill -9 (Linux's parent-death
    signal): a serve worker never outlives its supervisor."""
    import signal

    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the signal was asked for
        os._exit(1)


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """The REPL lives for hours: the collector is on between lines."""
    gc.enable()
    try:
        yield
    finally:
        gc.disable()


@contextlib.contextmanager
def serving() -> Iterator[None]:
    """`koog serve` lives for days and allocates tens of thousands of objects a request
    (a resent conversation parsed, placed, encoded): the collector is on, but what was
    loaded at start-up (the SDKs, the app) is frozen out of its scans, and the youngest
    generation is collected every 50,000 allocations instead of 700 (a request on 5,000
    resent messages spent a quarter of its CPU in collections: 102 -> 76 ms)."""
    gc.freeze()
    old = gc.get_threshold()
    gc.set_threshold(50_000, 20, 20)
    gc.enable()
    try:
        yield
    finally:
        gc.disable()
        gc.set_threshold(*old)


@contextlib.contextmanager
def per_line() -> Iterator[None]:
    """A line is handled without collector pauses (a turn over 50,000 messages waited
    0.1-0.2 s longer for them). Once it is done, what it allocated is collected (the young
    generations: about 20 ms after such a turn, where a full collection of a heap holding
    the openai SDK takes 0.1 s), while the reply is read."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(1)


def leave(code: object) -> NoReturn:
    """Exit without interpreter teardown. By now every file koog wrote is closed and
    synced; tearing down the modules (the openai SDK's above all) would only cost a fifth
    of a second per command. Output still buffered is flushed first. KOOG_DEBUG=1 exits
    the usual way, for tools that report at exit."""
    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = 1
    status = code if isinstance(code, int) else 0
    from koogcli.core import exit_hooks

    exit_hooks.run()  # what must still happen: MCP servers closed
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader that went away is done
            stream.flush()
    if os.environ.get("KOOG_DEBUG") == "1":
        sys.exit(status)
    os._exit(status)

"""Where koog's output goes and what the terminal can do, as one injectable value (as
httpie's `Environment`): the streams, and the environment variables that change output
(NO_COLOR). The CLI and the REPL use the process's; tests and embedders put their own in
place with `using(...)`, for the current thread or task only. ui/ reads the streams
through `current()` and nowhere else."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TextIO


@dataclass(frozen=True)
class Environment:
    stdin: TextIO
    stdout: TextIO
    stderr: TextIO
    variables: Mapping[str, str]

    @property
    def no_color(self) -> bool:
        return bool(self.variables.get("NO_COLOR"))


_CURRENT: ContextVar[Environment | None] = ContextVar("koog_environment", default=None)


def current() -> Environment:
    """The environment in place, else the process's (read afresh: a test runner that
    replaces sys.stdout is followed)."""
    found = _CURRENT.get()
    if found is not None:
        return found
    return Environment(sys.stdin, sys.stdout, sys.stderr, os.environ)


@contextmanager
def using(environment: Environment) -> Iterator[Environment]:
    token = _CURRENT.set(environment)
    try:
        yield environment
    finally:
        _CURRENT.reset(token)

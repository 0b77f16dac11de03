"""Output goes where the environment in place says (ui/environment.py), for this thread."""

from __future__ import annotations

import io
import threading

from koogcli.core.errors import ConfigError
from koogcli.ui import render
from koogcli.ui.environment import Environment, current, using


def _env(**variables: str) -> Environment:
    return Environment(io.StringIO(), io.StringIO(), io.StringIO(), variables)


def test_results_warnings_and_errors_go_to_the_injected_streams() -> None:
    env = _env()
    with using(env):
        render.out("a result")
        render.json_out({"n": 1})
        render.warning("careful")
        render.error(ConfigError("bad key", hint="fix it"))
    assert env.stdout.getvalue() == 'a result\n{\n  "n": 1\n}\n'  # type: ignore[attr-defined]
    assert env.stderr.getvalue().splitlines() == [  # type: ignore[attr-defined]
        "koog: warning: careful",
        "koog: error: bad key",
        "koog: hint: fix it",
    ]
    assert current() is not env  # left as it was


def test_an_environment_is_per_thread() -> None:
    mine, theirs = _env(), _env(NO_COLOR="1")
    seen: list[bool] = []

    def other() -> None:
        with using(theirs):
            render.out("from the other thread")
            seen.append(current().no_color)

    with using(mine):
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        render.out("from this thread")
    assert mine.stdout.getvalue() == "from this thread\n"  # type: ignore[attr-defined]
    assert theirs.stdout.getvalue() == "from the other thread\n"  # type: ignore[attr-defined]
    assert seen == [True] and not mine.no_color

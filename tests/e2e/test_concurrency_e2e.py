"""Many processes, one session: every turn lands once (revision check, re-apply on
conflict, the append log under the session lock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.turn_workers import expected, run_workers, user_turns

pytestmark = pytest.mark.e2e


def test_eight_processes_of_ten_turns_lose_and_duplicate_nothing(
    koog_env: dict[str, str], server: FakeOpenAIServer, data_dir: Path
) -> None:
    run_workers([koog_env] * 8, turns=10, timeout=120)
    users = user_turns(koog_env)
    assert sorted(users) == expected(8, 10)
    assert set(users.values()) == {1}

from __future__ import annotations

from pathlib import Path

import pytest

from koogcli.core.callables import resolve
from koogcli.core.errors import ConfigError


def test_resolves_from_a_search_folder(tmp_path: Path) -> None:
    (tmp_path / "koog_helper_mod.py").write_text("def twice(x):\n    return 2 * x\n")
    assert resolve("koog_helper_mod:twice", [tmp_path])(21) == 42


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no_colon", "is not of the form 'module:function'"),
        ("koog_missing_module_xyz:f", "cannot import 'koog_missing_module_xyz'"),
        ("json:no_such_thing", "has no attribute 'no_such_thing'"),
        ("json:__doc__", "is not callable"),
    ],
)
def test_clear_errors(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        resolve(spec, key="chat_memory.preprocessors.0.callable")
    assert info.value.message.startswith("chat_memory.preprocessors.0.callable = ")
    assert info.value.exit_code == 2

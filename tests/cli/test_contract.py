"""Contract slips found by trying koog as a user (SPEC §2): each one a test."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.chat_model import FakeChatModel


def test_import_replace_asks_and_takes_yes(koog: Callable[..., Any], tmp_path: Path) -> None:
    assert koog("chat", "-s", "i", "keep me").exit_code == 0
    source = tmp_path / "other.json"
    source.write_text('[{"role": "user", "content": "imported"}]')
    refused = koog("history", "import", "-s", "i", str(source), "--replace")
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    kept = koog("history", "show", "-s", "i").stdout
    assert "keep me" in kept
    done = koog("history", "import", "-s", "i", str(source), "--replace", "--yes")
    assert done.exit_code == 0, done.stderr
    assert koog("history", "show", "-s", "i").stdout == "[user] imported\n"
    # Nothing to lose: a new session takes --replace without asking.
    fresh = koog("history", "import", "-s", "new", str(source), "--replace")
    assert fresh.exit_code == 0, fresh.stderr


@pytest.mark.parametrize(
    "args",
    [("checkpoint", "list", "-s", "nosuch"), ("chat", "-s", "nosuch", "--resume")],
)
def test_commands_on_a_missing_session_exit_2(koog: Callable[..., Any], args: tuple[str]) -> None:
    result = koog(*args)
    assert result.exit_code == 2
    assert "no session named 'nosuch'" in result.stderr


@pytest.mark.parametrize("group", ["", "history", "checkpoint", "memory", "config", "storage"])
def test_no_command_summary_is_cut(koog: Callable[..., Any], group: str) -> None:
    shown = koog(*([group] if group else []), "--help")
    assert shown.exit_code == 0
    cut = [
        line for line in shown.stdout.splitlines() if line.endswith("...") and "Usage" not in line
    ]
    assert cut == []


def test_history_show_last_zero_is_a_usage_error(koog: Callable[..., Any]) -> None:
    koog("chat", "-s", "h", "hello")
    result = koog("history", "show", "-s", "h", "--last", "0")
    assert result.exit_code == 2 and "--last" in result.stderr


def test_an_oversized_attachment_is_reported_with_its_size(
    koog: Callable[..., Any], tmp_path: Path
) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 2_000_000)
    result = koog("chat", "-s", "a", "-a", str(big), "read this")
    assert result.exit_code == 2
    assert "attachment big.txt is 2,000,000 bytes" in result.stderr


def test_a_non_ascii_session_name_is_shown_as_typed(koog: Callable[..., Any]) -> None:
    result = koog("chat", "-s", "ümlaut", "hi")
    assert result.exit_code == 2
    assert "invalid session name: 'ümlaut'" in result.stderr
    assert "ASCII letters" in result.stderr


def test_an_argument_that_is_not_utf8_is_a_usage_error(koog: Callable[..., Any]) -> None:
    result = koog("chat", "-s", "in", "caf\udce9")  # the byte 0xe9, as Python passes it on
    assert result.exit_code == 2
    assert (
        result.stderr.splitlines()[0] == "koog: error: an argument is not valid UTF-8: b'caf\\xe9'"
    )


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_install_completion_installs_for_the_shell_named(
    koog: Callable[..., Any], shell: str, isolated: Path
) -> None:
    result = koog("--install-completion", shell)
    assert result.exit_code == 0, result.stderr
    home = Path(os.environ["HOME"])
    found = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    assert (
        found
        == {
            "zsh": [".zfunc/_koog", ".zshrc"],
            "fish": [".config/fish/completions/koog.fish"],
        }[shell]
    )
    shown = koog("--show-completion", shell)
    assert shown.exit_code == 0 and "_KOOG_COMPLETE" in shown.stdout


def test_the_readme_names_every_compression_strategy() -> None:
    from typing import get_args

    from koogcli.config.schema import StrategyName

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    [usage] = [line for line in readme.splitlines() if line.startswith("koog compress -s work [")]
    assert [s for s in get_args(StrategyName) if s not in usage] == []


def test_a_damaged_memory_row_names_the_store_and_the_record(
    koog: Callable[..., Any], backend: str, data_dir: Path
) -> None:
    added = koog("memory", "add", "deploys are blue-green")
    assert added.exit_code == 0
    record = added.stdout.strip()
    if backend == "files":
        with sqlite3.connect(data_dir / "memory.sqlite3") as db:
            db.execute("UPDATE records SET metadata = '{bad'")
        where = str(data_dir / "memory.sqlite3")
    else:
        import psycopg

        url, schema = os.environ["KOOG_DATABASE_URL"], os.environ["KOOG_DATABASE_SCHEMA"]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"UPDATE {schema}.memory_records SET metadata = '{{bad'")
        where = "table memory_records"
    for args in (("memory", "search", "deploys"), ("memory", "list"), ("memory", "show", record)):
        result = koog(*args)
        assert result.exit_code == 3, (args, result.stderr)
        first = result.stderr.splitlines()[0]
        assert where in first and record in first and "damaged" in first, first
    assert koog("memory", "delete", record, "--yes").exit_code == 0  # the way out it names


@pytest.mark.parametrize(
    "text, said",
    [
        ("a = " + "[" * 100_000 + "]" * 100_000 + "\n", "values nested too deeply"),
        ('x = "' + "a" * (2 * 1024 * 1024) + '"\n', "is larger than 1,048,576 bytes"),
    ],
    ids=["deep", "huge"],
)
def test_a_hostile_config_file_is_exit_2_naming_it(
    koog: Callable[..., Any], write_config: Callable[[str], Path], text: str, said: str
) -> None:
    path = write_config(text)
    for args in (("chat", "-s", "c", "hi"), ("config", "validate", str(path))):
        result = koog(*args)
        assert result.exit_code == 2, result.stderr
        first = result.stderr.splitlines()[0]
        assert path.name in first and said in first


def test_history_show_of_a_session_with_only_a_transcript_is_exit_2(
    koog: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    from koogcli.core.errors import ModelError

    fake_model.enqueue(ModelError("server down"))
    assert koog("chat", "-s", "gone", "first words").exit_code == 1  # nothing stored
    shown = koog("history", "show", "-s", "gone")
    assert shown.exit_code == 2 and "only its transcript is kept" in shown.stderr
    transcript = koog("history", "show", "-s", "gone", "--transcript")
    assert transcript.exit_code == 0 and "first words" in transcript.stdout


def test_a_fifo_in_place_of_a_session_file_is_exit_3_not_a_hang(
    koog: Callable[..., Any], data_dir: Path
) -> None:
    assert koog("chat", "-s", "f", "hello").exit_code == 0
    log = data_dir / "sessions" / "f.log"
    log.unlink(missing_ok=True)
    os.mkfifo(log)
    result = koog("history", "show", "-s", "f")
    assert result.exit_code == 3 and "f.log: it is not a regular file" in result.stderr

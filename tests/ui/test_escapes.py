"""The one escaping rule at the output mechanism (SPEC §6, issue 51): `out()` shows control
characters on a terminal unless koog styled the text, writes a pipe byte for byte; a table
shows its cells visibly anywhere; JSON escapes DEL and C1 as well as C0."""

from __future__ import annotations

import io
import json

import pytest

from koogcli.ui import render
from koogcli.ui.environment import Environment, using
from koogcli.ui.reply import ReplyWriter

HOSTILE = "t\x1b]0;pwned\x07 c\x1b]52;c;eA==\x07 x\x1b[2J y\x9b31m z\x7f\r"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _shown(stream: io.StringIO, *texts: str, styled: bool = False) -> str:
    with using(Environment(io.StringIO(), stream, stream, {})):
        for text in texts:
            render.out(text, styled=styled)
    return stream.getvalue()


def test_out_shows_escapes_on_a_terminal_and_writes_a_pipe_as_it_is() -> None:
    shown = _shown(Terminal(), HOSTILE)
    assert shown == "t^[]0;pwned^G c^[]52;c;eA==^G x^[[2J y\\x9b31m z^?^M\n"
    assert _shown(io.StringIO(), HOSTILE) == HOSTILE + "\n"


def test_out_leaves_text_koog_styled_itself() -> None:
    assert _shown(Terminal(), "\x1b[7mword\x1b[27m", styled=True) == "\x1b[7mword\x1b[27m\n"


def test_a_table_shows_its_cells_visibly_anywhere() -> None:
    text = render.table([("a\x1b[2J", "b\x9b")], ("ONE", "TWO"))
    assert text.splitlines()[1] == "a^[[2J  b\\x9b"


@pytest.mark.parametrize("indent", [2, None])
def test_json_escapes_del_and_c1_and_keeps_the_text(indent: int | None) -> None:
    data = {"reply": HOSTILE, "word": "héllo ☃"}
    text = render.json_text(data, indent)
    assert "\\u009b31m" in text and "\\u007f" in text and "héllo ☃" in text
    assert not any(0x7F <= ord(c) <= 0x9F or (ord(c) < 0x20 and c != "\n") for c in text)
    assert json.loads(text) == data


def test_a_streamed_reply_shows_escapes_on_a_terminal_and_keeps_crlf_a_line_break() -> None:
    deltas = ["a\r", "\nb\rc ", "\x1b]0;x\x07\r\n", "d\x9b"]
    for stream, expected in (
        (Terminal(), "a\nb^Mc ^[]0;x^G\nd\\x9b\n"),
        (io.StringIO(), "".join(deltas) + "\n"),  # a pipe: byte for byte
    ):
        with using(Environment(io.StringIO(), stream, io.StringIO(), {})):
            writer = ReplyWriter(stream, markdown=False)
            for delta in deltas:
                writer.delta(delta)
            writer.finish()
        assert stream.getvalue() == expected

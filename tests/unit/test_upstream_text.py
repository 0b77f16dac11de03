"""What koog reads from an upstream, bounded and without the key: core/key_scrub.py,
core/bounded_json.py and the event reader of adapters/model/sse.py."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from koogcli.adapters.model import sse
from koogcli.core import bounded_json
from koogcli.core.errors import ModelError
from koogcli.core.key_scrub import Holdback, KeyScrub

KEY = "9f2c4e6a8b0d1f3e5a7c9b1d3f5e7a9c"


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        (f"bad key {KEY}.", "bad key [key removed]."),
        (f"provided: {KEY[:6]}****{KEY[-4:]}", "provided: [key removed]"),
        (f"({KEY[:3]}...{KEY[-3:]})", "([key removed])"),
        (f"key={KEY[:16]} was cut", "key=[key removed] was cut"),
        (f'"{KEY.replace("f", "/")}"', '"' + KEY.replace("f", "/") + '"'),  # not the key
        ("set OPENAI_API_KEY=sk-... first", "set OPENAI_API_KEY=sk-... first"),
        ("wait... 9f2c", "wait... 9f2c"),
    ],
)
def test_the_key_and_its_masked_forms_are_removed_from_an_errors_words(
    said: str, shown: str
) -> None:
    assert KeyScrub(KEY).text(said) == shown


def test_a_replys_text_loses_the_exact_key_even_split_across_pieces() -> None:
    scrub = KeyScrub(KEY)
    assert scrub.reply(f"sk-... and {KEY[:6]}**** stay; {KEY} goes") == (
        f"sk-... and {KEY[:6]}**** stay; [key removed] goes"
    )
    held = Holdback(scrub)
    text = f"here it is: {KEY}, and 9f"
    shown = "".join(held.feed(text[i : i + 5]) for i in range(0, len(text), 5)) + held.flush()
    assert shown == "here it is: [key removed], and 9f"
    assert not KeyScrub("") and KeyScrub("short").text("short") == "short"


@pytest.mark.parametrize("levels", [128, 129, 3_000, 100_000])
def test_json_deeper_than_the_bound_is_a_value_error(levels: int) -> None:
    text = "[" * levels + "]" * levels
    if levels <= bounded_json.MAX_DEPTH:
        assert bounded_json.loads(text) is not None
        return
    with pytest.raises(bounded_json.TooDeepError, match="nested deeper than 128 levels"):
        bounded_json.loads(text.encode())


class _Body:
    def __init__(self, *pieces: bytes, pause: float = 0.0) -> None:
        self.pieces, self.pause = pieces, pause

    def iter_bytes(self) -> Iterator[bytes]:
        for piece in self.pieces:
            time.sleep(self.pause)
            yield piece


def test_an_event_past_its_bound_is_refused_before_it_is_whole() -> None:
    bounds = sse.Bounds("http://up/v1", max_event=1000)
    small = [d for _, d in sse.events(_Body(b"data: a\r\n\r\ndata: b\n", b"data: c\n\n"), bounds)]
    assert small == ["a", "b\nc"]
    endless = _Body(b"data: ", *([b"x" * 300] * 10))
    with pytest.raises(ModelError, match="larger than 1,000 bytes"):
        list(sse.lines(endless, bounds))
    many = _Body(*([b"data: xxxxxxxx\n"] * 200))
    with pytest.raises(ModelError, match="sent an event larger"):
        list(sse.lines(many, bounds))


def test_a_reply_past_its_deadline_ends_at_the_next_piece() -> None:
    bounds = sse.Bounds.starting("http://up/v1", 0.05)
    with pytest.raises(ModelError, match=r"did not finish the reply within 0\.05s"):
        list(sse.lines(_Body(*([b"data: a\n\n"] * 100), pause=0.01), bounds))

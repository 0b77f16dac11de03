"""Streamed Markdown: blocks finish as early as they can, and printing them one by one
gives the rendering of the whole reply."""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console
from rich.markdown import Markdown

from koogcli.ui.markdown_blocks import BlockSplitter
from koogcli.ui.markdown_stream import BlockRenderer, Tail

PIECES = [
    "# Title",
    "Para one with **bold** and `code`.\nSecond line.",
    "- a\n- b\n  continued",
    "1. x\n\n2. y",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "```python\ndef f():\n\n    return 1\n```",
    "> quote\n> more",
    "---",
    "    indented code",
    "Setext\n======",
    "* star\n\n  para in item\n\n* next",
    "## Sub heading\ntext after",
    "~~~\ncode ~~~ inside\n~~~",
    "Text\n```\nfence right after\n```",
]


def console() -> Console:
    return Console(file=io.StringIO(), width=60, force_terminal=True, color_system="truecolor")


def whole(text: str) -> str:
    c = console()
    c.print(Markdown(text))
    return c.file.getvalue()  # type: ignore[attr-defined]


def streamed(text: str, rng: random.Random) -> tuple[str, int]:
    c = console()
    splitter, renderer = BlockSplitter(), BlockRenderer(c)
    blocks = 0
    at = 0
    while at < len(text):
        size = rng.randint(1, 9)
        for block in splitter.feed(text[at : at + size]):
            c.print(renderer.render(block))
            blocks += 1
        at += size
    if last := splitter.close():
        c.print(renderer.render(last))
        blocks += 1
    return c.file.getvalue(), blocks  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(40))
def test_blocks_printed_one_by_one_are_the_whole_rendering(seed: int) -> None:
    rng = random.Random(seed)
    text = "\n\n".join(rng.choice(PIECES) for _ in range(rng.randint(2, 7)))
    shown, _ = streamed(text, rng)
    assert shown == whole(text)


def test_a_long_reply_is_printed_in_many_blocks_not_at_the_end() -> None:
    text = "\n\n".join(PIECES * 3)
    _, blocks = streamed(text, random.Random(1))
    assert blocks >= 20


def feed_all(splitter: BlockSplitter, text: str) -> list[str]:
    return [block for char in text for block in splitter.feed(char)]


def test_a_paragraph_finishes_when_the_next_block_starts() -> None:
    splitter = BlockSplitter()
    assert feed_all(splitter, "First para.\n\n") == []
    assert splitter.feed("Next") == []  # its first line decides: it could be indented
    assert splitter.feed(" one\nmore") == ["First para."]
    assert splitter.growing == "Next one\nmore"


def test_a_closed_fence_and_a_heading_finish_at_once() -> None:
    splitter = BlockSplitter()
    assert feed_all(splitter, "```\ncode\n\nmore\n```\n") == ["```\ncode\n\nmore\n```"]
    assert feed_all(splitter, "# Heading\n") == ["# Heading"]


@pytest.mark.parametrize(
    "text",
    [
        "- a\n\n- b\n",  # a loose list goes on
        "1. a\n\n   continued in the item\n",  # an indented line continues the item
        "    code\n\n    more code\n",
        "  ```\n  fence in an item\n  ```\n",
    ],
)
def test_what_could_still_change_is_not_finished(text: str) -> None:
    assert feed_all(BlockSplitter(), text) == []


def test_the_growing_block_shows_its_tail_within_the_height() -> None:
    c = console()
    text = "\n".join(f"- line {i}" for i in range(100))
    c.print(Tail(text, 10))
    lines = c.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 10
    assert "line 99" in lines[-1]

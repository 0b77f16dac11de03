"""`koog chat`'s pipeline pieces (core/structured.py, cli/app.py's pairs): llm's concise
schema syntax, the JSON a reply holds, fenced blocks, typed options."""

from __future__ import annotations

import pytest

from koogcli.cli.app import PAIR_JOIN, paired
from koogcli.core import structured
from koogcli.core.errors import UsageError


def test_the_concise_syntax_types_and_describes_each_field() -> None:
    found = structured.parse("name, age int, bio: a short bio, score float, ok bool")
    assert found["properties"] == {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "bio": {"type": "string", "description": "a short bio"},
        "score": {"type": "number"},
        "ok": {"type": "boolean"},
    }
    assert found["required"] == ["name", "age", "bio", "score", "ok"]
    lines = structured.parse("name: the full name, with commas\nage int")
    assert lines["properties"]["name"]["description"] == "the full name, with commas"
    assert structured.parse('{"type": "object"}') == {"type": "object"}
    for bad in ("age integer", "", "{not json", "[1]"):
        with pytest.raises(UsageError):
            structured.parse(bad)
    assert structured.multi({"type": "object"})["properties"]["items"]["type"] == "array"


def test_a_replys_document_and_its_fenced_blocks() -> None:
    assert structured.document('```json\n{"a": 1}\n```') == {"a": 1}
    assert structured.document(' {"a": 1}\n') == {"a": 1}
    with pytest.raises(ValueError):
        structured.document("Sure! {")
    reply = "one\n```sh\necho 1\n```\ntwo\n````md\n```inner```\n````\n"
    assert structured.fenced_block(reply) == "echo 1\n"
    assert structured.fenced_block(reply, last=True) == "```inner```\n"
    assert structured.fenced_block("no code") is None


def test_options_are_typed_as_json_types_them() -> None:
    values = ["0.3", "7", "true", "null", '{"a": 1}', "###", '"quoted"', "gpt-4o"]
    typed = [structured.option_value(v) for v in values]
    assert typed == [0.3, 7, True, None, {"a": 1}, "###", '"quoted"', "gpt-4o"]


def test_key_value_pairs_travel_as_one_value_after_chat_only() -> None:
    argv = ["chat", "-o", "seed", "7", "--param", "name", "Ada", "hi"]
    assert paired(argv) == [
        "chat",
        "-o",
        f"seed{PAIR_JOIN}7",
        "--param",
        f"name{PAIR_JOIN}Ada",
        "hi",
    ]
    assert paired(["history", "show", "-o", "x", "y"]) == ["history", "show", "-o", "x", "y"]
    assert paired(["chat", "-o", "seed", "--", "hi"]) == ["chat", "-o", "seed", "--", "hi"]
    assert paired(["chat", "-o", "seed"]) == ["chat", "-o", "seed"]
    export = ["history", "export", "-s", "chat", "-o", "out.html", "--format", "html"]
    assert paired(export) == export  # a session named chat is no chat command
    given = ["--data-dir", "d", "chat", "-p", "k", "v"]
    assert paired(given) == ["--data-dir", "d", "chat", "-p", f"k{PAIR_JOIN}v"]


def test_a_document_in_words_and_checked_options() -> None:
    said = 'Here you go:\n\n```json\n{"a": 1}\n```\n\nAnything else?'
    assert structured.document(said) == {"a": 1}
    with pytest.raises(ValueError):  # two blocks: which one is the answer is not known
        structured.document("```json\n{}\n```\nor\n```json\n[]\n```")
    assert structured.option(" seed ", "7") == ("seed", 7)
    for key, raw in (
        ("temperature", "hot"),
        ("temperature", "true"),
        ("model", "x"),
        ("x", "1e400"),
    ):
        with pytest.raises(UsageError):
            structured.option(key, raw)

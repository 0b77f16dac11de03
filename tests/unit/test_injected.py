"""What agents inject is not what the person wrote (core/injected.py): `history list`'s
preview is the person's first prompt."""

from __future__ import annotations

import pytest

from koogcli.core.injected import first_prompt
from koogcli.core.messages import Message, assistant, user


@pytest.mark.parametrize(
    ("messages", "preview"),
    [
        ([user("<system-reminder>\nnotes\n</system-reminder>fix it")], "fix it"),
        (
            [user("<environment_context>\n<cwd>/w</cwd>\n</environment_context>"), user("go")],
            "go",
        ),
        (
            [user("# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>x</INSTRUCTIONS>"), user("go")],
            "go",
        ),
        (
            [user("<command-name>/init</command-name><command-args></command-args>"), user("hi")],
            "hi",
        ),
        ([user("what does <div>hi</div> render as?")], "what does <div>hi</div> render as?"),
        (
            [assistant("hello"), user("<system-reminder>only</system-reminder>")],
            "<system-reminder>only</system-reminder>",
        ),
        ([], ""),
    ],
)
def test_the_preview_is_the_persons_first_prompt(messages: list[Message], preview: str) -> None:
    assert first_prompt(messages) == preview

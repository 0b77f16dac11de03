"""Builds the PromptSession; `input`/`output` are injectable so tests drive it in-process."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory

from koogcli.repl.keys import bindings


class SlashCompleter(Completer):
    def __init__(self, names: Iterable[str]) -> None:
        self.names = sorted(names)

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or " " in text:
            return
        for name in self.names:
            if name.startswith(text[1:]):
                yield Completion("/" + name, start_position=-len(text))


class RedactedFileHistory(FileHistory):
    """The input history file gets what the redact preprocessors leave, like every file koog
    writes; this session's Up-arrow and Ctrl-R still see the input as typed."""

    def __init__(self, filename: str, redact: Callable[[str], str]) -> None:
        super().__init__(filename)
        self.redact = redact

    def store_string(self, string: str) -> None:
        super().store_string(self.redact(string))


def input_history(path: Path | None, redact: Callable[[str], str] = lambda text: text) -> History:
    """Persistent input history (Ctrl-R searches it), created private to the user."""
    if path is None:
        return InMemoryHistory()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    return RedactedFileHistory(str(path), redact)


def build(
    commands: Iterable[str],
    history_file: Path | None,
    input: Any = None,
    output: Any = None,
    redact: Callable[[str], str] = lambda text: text,
) -> PromptSession[str]:
    return PromptSession(
        history=input_history(history_file, redact),
        completer=SlashCompleter(commands),
        complete_while_typing=True,
        key_bindings=bindings(),
        multiline=False,
        input=input,
        output=output,
    )

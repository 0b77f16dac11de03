"""Builds the PromptSession; `input`/`output` are injectable so tests drive it in-process."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import (
    CompleteEvent,
    Completer,
    Completion,
    PathCompleter,
    ThreadedCompleter,
)
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory

from koogcli.repl.keys import bindings
from koogcli.repl.slash import Registry


class SlashCompleter(Completer):
    """Slash commands, then their arguments: values from the command's completer (with a
    description beside each), or file paths."""

    def __init__(self, registry: Registry, state: Callable[[], Any] | None = None) -> None:
        self.registry = registry
        self.state = state or (lambda: None)
        self._paths = PathCompleter(expanduser=True)

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or "\n" in text:
            return
        name, space, argument = text[1:].partition(" ")
        if not space:
            for known in self.registry.names():
                if known.startswith(name):
                    yield Completion("/" + known, start_position=-len(text))
            return
        command = self.registry.commands.get(name)
        if command is None:
            return
        if command.paths:
            yield from self._paths.get_completions(Document(argument), event)
            return
        state = self.state()
        if command.complete is None or state is None:
            return
        for value, meta in command.complete(state, argument):
            yield Completion(value, start_position=-len(argument), display_meta=meta or None)


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
    registry: Registry,
    history_file: Path | None,
    input: Any = None,
    output: Any = None,
    redact: Callable[[str], str] = lambda text: text,
    state: Callable[[], Any] | None = None,
) -> PromptSession[str]:
    """Completion runs in a thread: `/model ` asks the endpoint once, and typing never
    waits for it. Ctrl-X Ctrl-E edits the message in $VISUAL / $EDITOR."""
    return PromptSession(
        history=input_history(history_file, redact),
        completer=ThreadedCompleter(SlashCompleter(registry, state)),
        complete_while_typing=True,
        key_bindings=bindings(),
        multiline=False,
        enable_open_in_editor=True,
        input=input,
        output=output,
    )

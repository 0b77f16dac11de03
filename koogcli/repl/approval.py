"""The REPL's questions, each answered by one key: the tool approval (y / n / a, no
Enter), as at a one-shot's terminal, and [y/N] confirmations (Enter is no). Ctrl-D
declines and a line says so, where a line prompt would have ended the input unseen; Ctrl-C
declines as before. Other keys are passed over. The answer is never sent as a message."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from koogcli.ui import render

if TYPE_CHECKING:
    from koogcli.core.messages import ToolCall


def ask(
    prompt: PromptSession[str],
    call: ToolCall,
    info: Callable[[str], None],
    undo: bool = False,
) -> str:
    """y, n or a; a question of its own on the REPL's terminal, so the prompt's keys and
    history are left as they were."""
    try:
        answer = one_key(prompt, render.approval_question(call, undo), "yna")
    except KeyboardInterrupt:
        return "n"
    if not answer:  # Ctrl-D
        info(render.approval_declined(call, undo))
        return "n"
    return answer


def yes_or_no(prompt: PromptSession[str], question: str) -> bool:
    """A [y/N] question answered by one key: y is yes; n, Enter, Ctrl-D and Ctrl-C are no.
    Keys typed after it stay for the prompt (they were never read by the question)."""
    try:
        return one_key(prompt, f"{question} [y/N] ", "yn", enter="n") == "y"
    except KeyboardInterrupt:
        return False


def one_key(prompt: PromptSession[str], question: str, keys: str, enter: str = "") -> str:
    """The first of `keys` typed (lower case), `enter` for Enter; "" for Ctrl-D."""
    asked: PromptSession[str] = PromptSession(
        input=prompt.input, output=prompt.output, key_bindings=_keys(keys, enter)
    )
    return asked.prompt(question)


def _keys(keys: str, enter: str) -> KeyBindings:
    kb = KeyBindings()

    def answer(event: KeyPressEvent) -> None:
        choice = event.data.lower()
        event.current_buffer.text = choice  # left on screen after the question
        event.app.exit(result=choice)

    for key in keys + keys.upper():
        kb.add(key)(answer)

    @kb.add("c-d")
    def _eof(event: KeyPressEvent) -> None:
        event.app.exit(result="")

    @kb.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        event.app.exit(exception=KeyboardInterrupt())

    @kb.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        if enter:
            event.current_buffer.text = enter
            event.app.exit(result=enter)

    @kb.add("<any>")
    def _other(event: KeyPressEvent) -> None:
        pass

    return kb

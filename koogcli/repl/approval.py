"""The tool approval question in the REPL: one key answers it (y / n / a, no Enter), as
at a one-shot's terminal. Ctrl-D declines and a line says so, where a line prompt would
have ended the input unseen; Ctrl-C declines as before. Other keys are passed over, so a
stray Enter answers nothing. The answer is never sent as a message."""

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
    question: PromptSession[str] = PromptSession(
        input=prompt.input, output=prompt.output, key_bindings=_keys()
    )
    try:
        answer = question.prompt(render.approval_question(call, undo))
    except KeyboardInterrupt:
        return "n"
    if not answer:  # Ctrl-D
        info(render.approval_declined(call, undo))
        return "n"
    return answer


def _keys() -> KeyBindings:
    kb = KeyBindings()

    def answer(event: KeyPressEvent) -> None:
        choice = event.data.lower()
        event.current_buffer.text = choice  # left on screen after the question
        event.app.exit(result=choice)

    for key in "ynaYNA":
        kb.add(key)(answer)

    @kb.add("c-d")
    def _eof(event: KeyPressEvent) -> None:
        event.app.exit(result="")

    @kb.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        event.app.exit(exception=KeyboardInterrupt())

    @kb.add("<any>")
    @kb.add("enter")
    def _other(event: KeyPressEvent) -> None:
        pass

    return kb

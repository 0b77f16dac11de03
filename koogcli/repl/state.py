"""What the REPL loop and its slash commands share: the session in use, the model chosen,
and where things are shown. Its own module so the commands and the loop need not import
each other."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from koogcli.core.errors import KoogError
from koogcli.core.names import SessionName
from koogcli.services.context import AppContext
from koogcli.ui import render
from koogcli.ui.reply import ReplyDisplay

if TYPE_CHECKING:
    from koogcli.core.messages import ToolCall
    from koogcli.core.ports import Usage
    from koogcli.services.prompt_input import Attachment


class ReplUI:
    """Where the REPL shows things; tests substitute a recording subclass."""

    def __init__(
        self, stdout: TextIO | None = None, markdown: bool = True, reflows: bool = True
    ) -> None:
        self.stdout = stdout or sys.stdout
        self.markdown = markdown
        self.reflows = reflows

    def reply(self) -> ReplyDisplay:
        from koogcli.ui.reply import ReplyWriter

        return ReplyWriter(self.stdout, markdown=self.markdown, reflows=self.reflows)

    def show(self, text: str) -> None:
        render.out(text, self.stdout)

    def info(self, text: str) -> None:
        render.note(text)

    def warning(self, text: str) -> None:
        render.warning(text)

    def error(self, err: KoogError) -> None:
        if err.hint:
            err.hint = in_repl_terms(err.hint)
        render.error(err)


# Shell commands that hints name, and what does the same inside the REPL.
SLASH_EQUIVALENTS = {
    "`koog compress`": "/compress",
    "`koog checkpoint list --all`": "/checkpoints",
    "`koog checkpoint list`": "/checkpoints",
    "`koog history list`": "/session and Tab",
}


def in_repl_terms(hint: str) -> str:
    for shell, slash in SLASH_EQUIVALENTS.items():
        hint = hint.replace(shell, slash)
    return hint


@dataclass
class ReplState:
    ctx: AppContext
    session: SessionName
    ui: ReplUI
    model: str | None = None
    running: bool = True
    ask: Callable[[str], bool] = lambda question: False
    # y / n / a for a tool call that needs approval; "n" when there is nobody to ask.
    approve: Callable[[ToolCall], str] = lambda call: "n"
    approve_undo: Callable[[ToolCall], str] = lambda call: "n"
    save: bool = True
    # Settings with a role's changes applied (`/role`); None: roles cannot be switched.
    rebuild: Callable[[dict[str, object]], AppContext] | None = None
    role: str | None = None
    models: list[str] | None = None  # the endpoint's models, fetched once for completion
    attachments: list[Attachment] = field(default_factory=list)  # for the next message
    last_text: str | None = None  # the last message sent, as typed (before redaction)
    # The last message whose turn failed or was cancelled (nothing stored): /retry sends it.
    failed_text: str | None = None
    last_reply: str | None = None
    usage: Usage | None = None  # tokens used by the turns of this REPL

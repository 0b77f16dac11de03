"""Key bindings for the REPL prompt.

Enter sends, Esc-Enter / Alt-Enter inserts a newline, and inside an unclosed ``` fence
Enter inserts a newline too, so pasted code blocks arrive whole. Ctrl-C clears a typed
line; on an empty line it leaves the REPL.
"""

from __future__ import annotations

from prompt_toolkit.enums import DEFAULT_BUFFER
from prompt_toolkit.filters import has_focus
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent


def should_submit(text: str) -> bool:
    """Pure predicate: Enter submits unless the text sits inside an open code fence."""
    return text.count("```") % 2 == 0


def bindings() -> KeyBindings:
    kb = KeyBindings()
    # Only while editing the message: in Ctrl-R search, Enter and Ctrl-C keep their meaning.
    editing = has_focus(DEFAULT_BUFFER)

    @kb.add("enter", filter=editing)
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if should_submit(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    @kb.add("escape", "enter", filter=editing)
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @kb.add("c-c", filter=editing)
    def _interrupt(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    return kb

"""ChatMemory turn semantics (KOOG_SEMANTICS §1, newest behaviour).

- Load: history = preprocess(stored); an empty history keeps the live prompt intact,
  otherwise the prompt is the live system messages + the history without its system
  messages (stored system messages are ignored, the live system prompt always wins).
- Store: once, when the turn completes: preprocess(history + new messages); a serve
  client's conversation is stored whole (redacted only) and preprocessed per request. Stored system
  messages stay where they were; when the live prompt differs from the latest stored one,
  it is stored just before the turn it answered, so a history never shows a later system
  prompt above turns answered under another (SPEC `--system` is per turn). A failed turn
  stores nothing, so the previous history is untouched.
- Lost updates: a store names the revision it loaded. On conflict the current history is
  reloaded, this turn's new messages re-appended and the result preprocessed again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from koogcli.core.errors import ConflictError, LockTimeoutError
from koogcli.core.messages import Message, system, without_system
from koogcli.core.names import SessionName
from koogcli.core.ports import HistoryStore, StoredHistory
from koogcli.core.preprocessors import Pipeline
from koogcli.core.why import StepTrace

MAX_STORE_ATTEMPTS = 200


def merge(live_prompt: Sequence[Message], history: Sequence[Message]) -> list[Message]:
    """Live system messages + history without its system messages.

    A stored system message with the same text as a live one stands in for it, keeping its
    id and timestamp: the history stays an extension of earlier snapshots (restore points,
    rollback's prefix rule) and the content sent is the live prompt either way.
    """
    if not history:
        return list(live_prompt)
    stored = {m.text: m for m in history if m.role == "system"}
    live = [stored.get(m.text, m) for m in live_prompt if m.role == "system"]
    return live + without_system(history)


def latest_prompt(history: Sequence[Message]) -> list[Message]:
    """The last run of consecutive system messages: the prompt the latest turn ran under."""
    end = next((i for i in range(len(history) - 1, -1, -1) if history[i].role == "system"), -1)
    start = end
    while start > 0 and history[start - 1].role == "system":
        start -= 1
    return list(history[start : end + 1]) if end >= 0 else []


def with_prompt(history: Sequence[Message], live_prompt: Sequence[Message]) -> list[Message]:
    """The history to store a turn on: the live prompt added where it changed. A first
    turn stores the whole live prompt (Koog keeps its setup messages)."""
    if not history:
        return list(live_prompt)
    live = [m for m in live_prompt if m.role == "system"]
    if not live or [m.text for m in latest_prompt(history)] == [m.text for m in live]:
        return list(history)
    present = {m.id for m in history}
    # A live message standing in for an earlier stored one (same text) needs its own id here.
    return [*history, *(system(m.text) if m.id in present else m for m in live)]


@dataclass(frozen=True, slots=True)
class LoadedPrompt:
    """`messages` is what the model is sent; `history` what the turn is stored on top of
    (None: the same list)."""

    messages: list[Message]
    revision: int
    history: list[Message] | None = None
    trace: tuple[StepTrace, ...] = ()  # what each preprocessor did (`koog why`)

    @property
    def base(self) -> list[Message]:
        return self.messages if self.history is None else self.history


@dataclass(frozen=True, slots=True)
class Committed:
    messages: list[Message]
    revision: int


class ChatMemory:
    def __init__(self, store: HistoryStore, pipeline: Pipeline) -> None:
        self.store = store
        self.pipeline = pipeline

    def load(
        self, session: SessionName, live_prompt: Sequence[Message], whole: bool = False
    ) -> LoadedPrompt:
        return self.prepare(self.store.read(session), live_prompt, whole)

    def prepare(
        self, stored: StoredHistory, live_prompt: Sequence[Message], whole: bool = False
    ) -> LoadedPrompt:
        """`whole` (a serve client's session, SPEC §6): the preprocessors shape only the
        request; the turn is stored on top of the whole stored conversation."""
        history, steps = self.pipeline.traced(stored.messages)
        base = list(stored.messages) if whole else history
        return LoadedPrompt(merge(live_prompt, history), stored.revision, base, steps)

    def preview(
        self, live_prompt: Sequence[Message], loaded: LoadedPrompt, new: Sequence[Message]
    ) -> list[Message]:
        """What `commit` would store, without storing it (`--no-save`)."""
        return self.pipeline([*with_prompt(loaded.base, live_prompt), *new])

    def commit(
        self,
        session: SessionName,
        live_prompt: Sequence[Message],
        loaded: LoadedPrompt,
        new_messages: Sequence[Message],
        whole: bool = False,
    ) -> Committed:
        """Store preprocess(history + new), re-applying on top of concurrent writers;
        `whole`: only the redactors run, the conversation is stored whole."""
        shape = self.pipeline.redact if whole else self.pipeline
        candidate = shape([*with_prompt(loaded.base, live_prompt), *new_messages])
        revision = loaded.revision
        for _ in range(MAX_STORE_ATTEMPTS):
            try:
                written = self.store.write(session, candidate, expected_revision=revision)
                return Committed(candidate, written)
            except ConflictError:
                current = self.load(session, live_prompt, whole)
                # Messages already there (a resumed turn whose store had landed) are not
                # appended twice.
                present = {m.id for m in current.base}
                missing = [m for m in new_messages if m.id not in present]
                candidate = shape([*with_prompt(current.base, live_prompt), *missing])
                revision = current.revision
        raise LockTimeoutError(
            f"session {session} kept changing under this turn; gave up after "
            f"{MAX_STORE_ATTEMPTS} attempts"
        )

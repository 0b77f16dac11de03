"""Long-term memory in turns: Koog's cases 52-60 (KOOG_SEMANTICS §5.2), adapted to koog's
turns, plus recall and embeddings against the local server's /embeddings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from koogcli.core.errors import ModelError, UsageError
from koogcli.core.messages import ToolCall
from koogcli.core.model_port import Completion
from koogcli.core.names import SessionName
from koogcli.services import memory
from koogcli.services.turn import TurnRequest, run_turn
from tests.fakes.chat_model import FakeChatModel, mortal
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.stored import stored_bytes

pytestmark = pytest.mark.usefixtures("backend")

S = SessionName("m")
KOTLIN = ["Kotlin was developed by JetBrains", "Kotlin coroutines simplify async programming"]


def ask(ctx: Any, text: str, **kw: Any) -> Any:
    return run_turn(ctx, TurnRequest(S, text, **kw))


def retrieval(write_config: Callable[[str], Path], **keys: str) -> None:
    """Retrieval on, under Koog's own scoring (jaccard) and placement (the system prompt)
    unless given."""
    keys = {"mode": '"jaccard"', "augmenter": '"system"', **keys}
    extra = "".join(f"{k} = {v}\n" for k, v in keys.items())
    write_config(f"[long_term_memory.retrieval]\nenabled = true\n{extra}")


@pytest.mark.parametrize("stream", [True, False])
def test_case52_the_model_sees_relevant_information(
    write_config: Callable[[str], Path],
    make_ctx: Callable[..., Any],
    fake_model: FakeChatModel,
    stream: bool,
) -> None:
    retrieval(write_config)
    ctx = make_ctx()
    for text in KOTLIN:
        memory.add(ctx, text)
    ask(ctx, "Tell me about Kotlin", stream=stream)
    sent = fake_model.requests[0].messages
    assert "Relevant information" in sent[0].text and KOTLIN[0] in sent[0].text
    assert sent[0].role == "system" and sent[-1].text == "Tell me about Kotlin"
    stored = stored_bytes(ctx, S)
    assert b"Relevant information" not in stored  # the augmentation is never stored


def test_case53_no_retrieval_no_augmentation(
    make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    ctx = make_ctx()
    memory.add(ctx, KOTLIN[0])
    ask(ctx, "Kotlin?")
    assert all("Relevant information" not in m.text for m in fake_model.requests[0].messages)


@pytest.mark.parametrize(("mode", "ran"), [("jaccard", "jaccard"), ("auto", "fulltext")])
def test_case54_the_search_receives_the_user_input(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any], mode: str, ran: str
) -> None:
    retrieval(write_config, mode=f'"{mode}"')
    ctx = make_ctx()
    seen: list[tuple[str, str]] = []
    original = ctx.long_term_memory.search

    def search(query: Any) -> Any:
        seen.append((query.mode, query.text))
        return original(query)

    ctx.long_term_memory.search = search
    ask(ctx, "weather")
    assert seen == [(ran, "weather")]


def test_user_augmenter_and_query_of_several_messages(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    retrieval(write_config, augmenter='"user"', query='"last_user_messages:2"')
    ctx = make_ctx()
    memory.add(ctx, "made by JetBrains")
    ask(ctx, "who made it")
    ask(ctx, "which company")
    sent = fake_model.requests[1].messages
    assert sent[-1].text.startswith("which company\n\nSome context")
    assert (
        "[1] made by JetBrains" in sent[-1].text and sent[0].text == "You are a helpful assistant."
    )
    assert sent[1].text == "who made it"


def ingestion(write_config: Callable[[str], Path], roles: str = '["user", "assistant"]') -> None:
    write_config(f"[long_term_memory.ingestion]\nenabled = true\nroles = {roles}\n")


def test_case56_completed_turns_are_ingested(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    ingestion(write_config)
    ctx = make_ctx()
    fake_model.enqueue("Assistant knows about Kotlin coroutines")
    ask(ctx, "Tell me about coroutines")
    assert memory.search(ctx, "Tell me about coroutines", mode="keyword")
    assert memory.search(ctx, "Assistant knows", mode="keyword")


@pytest.mark.parametrize(
    "roles, stored", [('["assistant"]', ["the reply"]), ('["user"]', ["What is Kotlin?"])]
)
def test_case57_roles_choose_what_is_stored(
    write_config: Callable[[str], Path],
    make_ctx: Callable[..., Any],
    fake_model: FakeChatModel,
    roles: str,
    stored: list[str],
) -> None:
    ingestion(write_config, roles)
    ctx = make_ctx()
    fake_model.enqueue("the reply")
    ask(ctx, "What is Kotlin?")
    assert [r.content for r in memory.list_(ctx)] == stored


def test_case58_each_message_is_stored_once(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    ingestion(write_config)
    ctx = make_ctx()
    fake_model.enqueue("First answer", "Second answer")
    ask(ctx, "First question")
    ask(ctx, "Follow-up question")
    texts = [r.content for r in memory.list_(ctx)]
    assert sorted(texts) == sorted(
        ["First question", "First answer", "Follow-up question", "Second answer"]
    )
    for text in texts:
        assert len(memory.search(ctx, text, mode="keyword")) == 1


def test_case59_ingestion_happens_only_at_completion(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    ingestion(write_config)
    ctx = make_ctx()
    sizes: list[int] = []

    def look(request: Any, on_delta: Any) -> Completion:
        sizes.append(ctx.long_term_memory.size("default"))
        return Completion("answer")

    fake_model.enqueue(look)
    ask(ctx, "question")
    assert sizes == [0] and ctx.long_term_memory.size("default") == 2


def test_case60_tool_turns_store_only_the_chosen_roles(
    write_config: Callable[[str], Path],
    make_ctx: Callable[..., Any],
    fake_model: FakeChatModel,
    isolated: Path,
) -> None:
    (isolated / "mem_tools_mod.py").write_text(
        'def weather(city: str) -> str:\n    """Weather."""\n    return "sunny in " + city\n'
    )
    tools = '[[tools]]\ncallable = "mem_tools_mod:weather"\n'
    write_config('[long_term_memory.ingestion]\nenabled = true\nroles = ["tool"]\n' + tools)
    ctx = make_ctx()
    fake_model.enqueue(Completion("", (ToolCall("c1", "weather", '{"city": "Oslo"}'),)), "done")
    ask(ctx, "use a tool")
    assert [r.content for r in memory.list_(ctx)] == ["sunny in Oslo"]
    write_config("[long_term_memory.ingestion]\nenabled = true\nroles = []\n")
    ctx = make_ctx()
    ask(ctx, "nothing stored")
    assert len(memory.list_(ctx)) == 1


def test_failed_turn_ingests_nothing(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any], fake_model: FakeChatModel
) -> None:
    ingestion(write_config)
    ctx = make_ctx()
    fake_model.enqueue(ModelError("down"))
    with pytest.raises(ModelError):
        ask(ctx, "lost question")
    assert memory.list_(ctx) == []


def test_ingest_session_twice_adds_nothing_new(make_ctx: Callable[..., Any]) -> None:
    ctx = make_ctx()
    for i in range(3):
        ask(ctx, f"q{i}")
    first = memory.ingest_session(ctx, S)
    second = memory.ingest_session(ctx, S)
    assert (first.added, second.added, second.skipped) == (6, 0, 6)
    with pytest.raises(UsageError, match="no session named"):
        memory.ingest_session(ctx, SessionName("nope"))


def test_recall_pins_one_memory_message(make_ctx: Callable[..., Any]) -> None:
    ctx = make_ctx()
    ask(ctx, "hello")
    memory.add(ctx, "the deploy uses blue-green")
    result = memory.recall(ctx, S, "deploy blue-green")
    history = ctx.history.read(S).messages
    assert history[-1] == result.message and history[-1].meta == {"kind": "memory"}
    assert history[-1].text.startswith("Here are the relevant facts from memory")
    assert memory.recall(ctx, S, "nothing like it").message is None
    assert len(ctx.history.read(S).messages) == len(history)


def embeddings_ctx(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any], server: FakeOpenAIServer
) -> Any:
    write_config('[long_term_memory.embeddings]\nmodel = "test-embed"\n')
    return make_ctx(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="k", KOOG_MAX_RETRIES="0")


def test_embeddings_rank_by_cosine_and_store_each_vector_once(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any], server: FakeOpenAIServer
) -> None:
    ctx = embeddings_ctx(write_config, make_ctx, server)
    for text in ["apple banana cherry", "car truck", "banana apple"]:
        memory.add(ctx, text)
    hits = memory.search(ctx, "apple banana", mode="embedding")
    assert [h.record.content for h in hits][:2] == ["banana apple", "apple banana cherry"]
    assert hits[0].metric == "cosine" and hits[0].score == pytest.approx(1.0)
    memory.search(ctx, "car", mode="embedding")
    inputs = [r["input"] for r in server.embedding_requests]
    assert inputs == [
        ["apple banana cherry"],
        ["car truck"],
        ["banana apple"],
        ["apple banana"],
        ["car"],
    ]
    assert ctx.long_term_memory.vector_count("test-embed") == 3


def test_records_from_before_embeddings_are_embedded_once(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any], server: FakeOpenAIServer
) -> None:
    plain = make_ctx()
    memory.add(plain, "old record")
    ctx = embeddings_ctx(write_config, make_ctx, server)
    memory.search(ctx, "old")
    memory.search(ctx, "record")
    inputs = [r["input"] for r in server.embedding_requests]
    assert inputs == [["old record"], ["old"], ["record"]]


def test_failing_embeddings_write_nothing(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any], server: FakeOpenAIServer
) -> None:
    ctx = embeddings_ctx(write_config, make_ctx, server)
    server.embedding_faults.append(500)
    with pytest.raises(ModelError, match="HTTP 500"):
        memory.add(ctx, "never stored")
    assert memory.list_(ctx) == []


def test_bad_input(make_ctx: Callable[..., Any]) -> None:
    ctx = make_ctx()
    with pytest.raises(UsageError, match="empty"):
        memory.add(ctx, "   ")
    with pytest.raises(UsageError, match="invalid namespace"):
        memory.add(ctx, "x", "../etc")
    with pytest.raises(UsageError, match="unknown search mode"):
        memory.search(ctx, "x", mode="fuzzy")
    with pytest.raises(UsageError, match="no memory record"):
        memory.delete(ctx, "nope-nope")
    with pytest.raises(UsageError, match="too short"):
        memory.delete(ctx, "nope")
    assert memory.search(ctx, "x", "unknown-namespace") == []


def test_ids_by_prefix_and_the_namespace_rule(make_ctx: Callable[..., Any]) -> None:
    ctx = make_ctx()
    first = memory.add(ctx, "deploys are blue-green")
    other = memory.add(ctx, "deploys happen on fridays", "ops")
    assert memory.show(ctx, first.id[:12]).content == "deploys are blue-green"
    assert [r.id for r in memory.list_(ctx)] == [first.id]  # the retrieval namespace
    assert {r.id for r in memory.list_(ctx, all_namespaces=True)} == {first.id, other.id}
    everywhere = memory.search(ctx, "deploys", all_namespaces=True)
    assert {h.record.namespace for h in everywhere} == {"default", "ops"}
    assert [h.record.id for h in memory.search(ctx, "deploys")] == [first.id]
    memory.delete(ctx, other.id[:6])
    assert memory.list_(ctx, "ops") == []


def test_retrieve_and_ingest_are_checkpointed_steps(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any]
) -> None:
    from koogcli.services.turn import resume_turn

    write_config(
        "[long_term_memory.retrieval]\nenabled = true\n"
        "[long_term_memory.ingestion]\nenabled = true\n"
    )
    ctx = mortal(make_ctx())
    ask(ctx, "remember the blue door")
    marks = [c for c in ctx.checkpoints.headers(S) if c.kind != "restore"]
    assert [c.step or c.kind for c in marks] == [
        "load",
        "retrieve:1",
        "model:1",
        "store",
        "ingest",
        "tombstone",
    ]
    assert marks[1].output == "0 records" and marks[4].output == "2 records added to default"
    ctx.checkpoints.delete(S, marks[-1].id)  # as if killed after ingesting
    assert resume_turn(ctx, S) is not None
    assert len(memory.list_(ctx)) == 2  # nothing ingested twice
    assert ctx.checkpoints.headers(S)[-1].kind == "tombstone"


def test_a_stored_turn_missing_its_closing_marks_is_closed_quietly_not_interrupted(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any]
) -> None:
    """The history landed, then the disk filled up: no `store`, `ingest` or tombstone mark.
    The next look closes it (ingesting its messages) instead of calling it interrupted, and
    a resume could never store it twice."""
    from koogcli.services.turn import close_stored, interrupted

    write_config("[long_term_memory.ingestion]\nenabled = true\n")
    ctx = mortal(make_ctx())
    ask(ctx, "remember the blue door")
    for mark in ctx.checkpoints.headers(S):
        if mark.kind == "tombstone" or mark.step in ("store", "ingest"):
            ctx.checkpoints.delete(S, mark.id)
    for record in memory.list_(ctx):
        memory.delete(ctx, record.id)
    before = ctx.history.read(S).messages
    assert interrupted(ctx, S) is not None  # what a later turn would have reported
    assert close_stored(ctx, S)
    assert interrupted(ctx, S) is None and not close_stored(ctx, S)
    assert ctx.history.read(S).messages == before  # nothing stored again
    assert len(memory.list_(ctx)) == 2  # its closing steps ran: ingested
    assert ctx.checkpoints.headers(S)[-1].kind == "tombstone"


def test_a_turn_that_never_stored_is_still_interrupted(make_ctx: Callable[..., Any]) -> None:
    from koogcli.services.turn import close_stored, interrupted

    ctx = mortal(make_ctx())
    ask(ctx, "one")
    for mark in ctx.checkpoints.headers(S):
        if mark.kind == "tombstone" or mark.step == "store":
            ctx.checkpoints.delete(S, mark.id)
    ctx.history.write(S, ctx.history.read(S).messages[:-2], None)  # died before storing
    assert not close_stored(ctx, S)
    assert interrupted(ctx, S) is not None


class FlakyEmbedder:
    """Fails while `down`; otherwise bag-of-words vectors like the test server's."""

    def __init__(self) -> None:
        self.down = True

    def embed(self, texts: list[str]) -> list[list[float]]:
        from koogcli.core.errors import ModelError
        from tests.fakes.openai_server import embed

        if self.down:
            raise ModelError("embeddings endpoint is down")
        return [embed(t) for t in texts]


def test_pending_ingestion_is_picked_up_by_memory_ingest_once(
    write_config: Callable[[str], Path], make_ctx: Callable[..., Any]
) -> None:
    write_config(
        '[long_term_memory.embeddings]\nmodel = "e"\n[long_term_memory.ingestion]\nenabled = true\n'
    )
    flaky = FlakyEmbedder()
    ctx = make_ctx()
    ctx.embedder_factory = lambda c: flaky
    warnings: list[str] = []
    from koogcli.services.turn import TurnEvents

    run_turn(ctx, TurnRequest(S, "the window is red"), TurnEvents(on_warning=warnings.append))
    assert len(warnings) == 1 and memory.list_(ctx) == []
    assert [m.text for m in ctx.pending_ingestion.load(S)] == [
        "the window is red",
        "echo: the window is red",
    ]
    flaky.down = False
    done = memory.ingest_session(ctx, S)
    assert done.added == 2 and ctx.pending_ingestion.load(S) == []
    assert memory.ingest_session(ctx, S).added == 0

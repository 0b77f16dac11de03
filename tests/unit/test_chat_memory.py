"""Koog's ChatMemory acceptance cases 1-14 (KOOG_SEMANTICS §5.2), plus lost-update safety.

A minimal agent harness runs one turn the way services/turn/run.py does: load + preprocess,
merge with the live prompt, append the input and the scripted answer, commit.
"""

from __future__ import annotations

from collections.abc import Sequence

from koogcli.core.chat_memory import ChatMemory
from koogcli.core.messages import Message, assistant, system, user
from koogcli.core.names import SessionName
from koogcli.core.preprocessors import Pipeline, PredicateFilter, Preprocessor, WindowPreprocessor
from tests.fakes.history_store import InMemoryHistoryStore

GEO = "You are a helpful geography assistant."
ANSWERS = {
    "France": "Paris is the capital of France.",
    "Germany": "Berlin is the capital of Germany.",
    "Italy": "Rome is the capital of Italy.",
    "Japan": "Tokyo is the capital of Japan.",
}


def answer(text: str) -> str:
    return next((a for k, a in ANSWERS.items() if k in text), f"Answer to {text}")


class Agent:
    def __init__(
        self,
        *steps: Preprocessor,
        system_prompt: str | None = GEO,
        initial: Sequence[Message] = (),
        replies: Sequence[str] = (),
    ) -> None:
        self.store = InMemoryHistoryStore()
        self.memory = ChatMemory(self.store, Pipeline(steps))
        self.live = ([system(system_prompt)] if system_prompt else []) + list(initial)
        self.replies = list(replies)
        self.seen: list[Message] = []

    def run(self, text: str, session: str = "s1") -> None:
        name = SessionName(session)
        loaded = self.memory.load(name, self.live)
        question = user(text)
        self.seen = [*loaded.messages, question]
        reply = assistant(self.replies.pop(0) if self.replies else answer(text))
        self.memory.commit(name, self.live, loaded, [question, reply])

    def stored(self, session: str = "s1") -> list[tuple[str, str]]:
        return [(m.role, m.text) for m in self.store.read(SessionName(session)).messages]


FRANCE, GERMANY = "What is the capital of France?", "What is the capital of Germany?"


def test_case1_no_system_prompt_two_runs() -> None:
    agent = Agent(system_prompt=None)
    agent.run(FRANCE)
    agent.run(GERMANY)
    assert agent.stored() == [
        ("user", FRANCE),
        ("assistant", ANSWERS["France"]),
        ("user", GERMANY),
        ("assistant", ANSWERS["Germany"]),
    ]


def test_case2_system_prompt_is_not_duplicated() -> None:
    agent = Agent()
    agent.run(FRANCE)
    agent.run(GERMANY)
    assert agent.stored() == [
        ("system", GEO),
        ("user", FRANCE),
        ("assistant", ANSWERS["France"]),
        ("user", GERMANY),
        ("assistant", ANSWERS["Germany"]),
    ]


def test_case3_initial_prompt_setup_message_survives_through_history() -> None:
    agent = Agent(initial=[user("I like to travel a lot!")])
    agent.run(FRANCE)
    agent.run(GERMANY)
    assert [t for _, t in agent.stored()] == [
        GEO,
        "I like to travel a lot!",
        FRANCE,
        ANSWERS["France"],
        GERMANY,
        ANSWERS["Germany"],
    ]


def test_case4_load_and_store_once_per_run_even_the_first() -> None:
    agent = Agent()
    for q in ("a", "b", "c"):
        agent.run(q, "sess-4")
    assert agent.store.loads == ["sess-4"] * 3
    assert agent.store.stores == ["sess-4"] * 3


def test_case5_sessions_are_isolated_even_interleaved() -> None:
    agent = Agent()
    for text, session in [
        ("France?", "A"),
        ("Japan?", "B"),
        ("France again", "A"),
        ("Japan again", "B"),
    ]:
        agent.run(text, session)
        assert all("Japan" not in t for _, t in agent.stored("A"))
    assert all("France" not in t for _, t in agent.stored("B"))


def _seed(agent: Agent) -> None:
    agent.store.write(
        SessionName("s1"),
        [user(FRANCE), assistant(ANSWERS["France"]), user(GERMANY), assistant(ANSWERS["Germany"])],
        None,
    )


def test_case6_preseeded_history_is_seen_before_the_new_message() -> None:
    agent = Agent()
    _seed(agent)
    agent.run("What about Italy?")
    users = [m.text for m in agent.seen if m.role == "user"]
    assert users == [FRANCE, GERMANY, "What about Italy?"]
    assert agent.seen[-1].text == "What about Italy?"


def test_case7_window_2_truncates_stored_history() -> None:
    agent = Agent(WindowPreprocessor(2, step=1))
    agent.run("Q1")
    agent.run("Q2")
    assert len(agent.stored()) == 2


def test_case8_window_4_is_applied_consistently_across_runs() -> None:
    agent = Agent(WindowPreprocessor(4, step=1))
    sizes = []
    for q in ("Q1", "Q2", "Q3", "Q4"):
        agent.run(q)
        sizes.append(len(agent.stored()))
    assert sizes == [3, 4, 4, 4]
    texts = [t for _, t in agent.stored()]
    assert "Q1" not in texts and "Q2" not in texts and "Q4" in texts


def test_case9_window_1() -> None:
    agent = Agent(WindowPreprocessor(1, step=1))
    agent.run("Q1")
    agent.run("Q2")
    assert len(agent.stored()) == 1


def test_case10_window_truncates_loaded_history() -> None:
    agent = Agent(WindowPreprocessor(2, step=1))
    _seed(agent)
    agent.run("New question")
    non_system = [m for m in agent.seen if m.role != "system"]
    assert len(non_system) <= 3
    assert all("France" not in m.text for m in non_system)


def is_user(m: Message) -> bool:
    return m.role == "user"


def test_case11_window_then_filter() -> None:
    agent = Agent(WindowPreprocessor(5, step=1), PredicateFilter(is_user))
    for q in ("Q1", "Q2", "Q3"):
        agent.run(q)
    assert agent.stored() == [("user", "Q1"), ("user", "Q2"), ("user", "Q3")]


def test_case12_filter_then_window() -> None:
    agent = Agent(PredicateFilter(is_user), WindowPreprocessor(2, step=1))
    for q in ("Q1", "Q2", "Q3"):
        agent.run(q)
    assert agent.stored() == [("user", "Q2"), ("user", "Q3")]


def test_case13_filter_by_length_drops_the_long_reply() -> None:
    long = "This is a very long reply that should be filtered out"
    agent = Agent(
        PredicateFilter(lambda m: len(m.text) <= 20), system_prompt=None, replies=["Short", long]
    )
    agent.run("Q1")
    agent.run("Q2")
    texts = [t for _, t in agent.stored()]
    assert "Short" in texts and long not in texts


def test_case14_in_memory_provider_overwrites() -> None:
    store = InMemoryHistoryStore()
    assert store.read(SessionName("unknown")).messages == []
    s = SessionName("s")
    store.write(s, [user("one"), assistant("two")], None)
    store.write(s, [user("New message")], None)
    assert [m.text for m in store.read(s).messages] == ["New message"]


def test_concurrent_commit_reapplies_new_messages_instead_of_losing_them() -> None:
    store = InMemoryHistoryStore()
    memory = ChatMemory(store, Pipeline())
    s, live = SessionName("s"), [system("sys")]
    first = memory.load(s, live)
    second = memory.load(s, live)
    memory.commit(s, live, first, [user("from A"), assistant("a")])
    memory.commit(s, live, second, [user("from B"), assistant("b")])
    assert [m.text for m in store.read(s).messages] == ["sys", "from A", "a", "from B", "b"]


def test_commit_after_a_landed_store_does_not_duplicate() -> None:
    store = InMemoryHistoryStore()
    memory = ChatMemory(store, Pipeline())
    s, live = SessionName("s"), [system("sys")]
    loaded = memory.load(s, live)
    new = [user("q"), assistant("a")]
    memory.commit(s, live, loaded, new)
    memory.commit(s, live, loaded, new)  # a resumed turn committing again from the old base
    assert [m.text for m in store.read(s).messages] == ["sys", "q", "a"]

"""Checkpoint rules and the file checkpoint store (Koog's persistence case 45, translated)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from koogcli.adapters.checkpoint_objects import decode_runs, encode_runs
from koogcli.adapters.file_checkpoints import FileCheckpointStore
from koogcli.adapters.paths import DataDir
from koogcli.core import checkpoints as core
from koogcli.core.checkpoints import Checkpoint
from koogcli.core.errors import CorruptDocumentError, UnknownFormatError
from koogcli.core.messages import ToolCall, assistant, system, tool_result, user
from koogcli.core.names import SessionName
from tests.damage import damaged
from tests.stored import checkpoint_doc, edit_checkpoint

S = SessionName("cp")


def make(kind: str = "restore", messages: tuple = (), **kw: object) -> Checkpoint:
    return Checkpoint(
        core.new_checkpoint_id(),
        "cp",
        0,
        kind,
        "2023-01-01T00:00:00Z",  # type: ignore[arg-type]
        messages,
        **kw,
    )  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> FileCheckpointStore:
    return FileCheckpointStore(DataDir(tmp_path / "data"))


def test_case45_save_two_list_latest_round_trip(store: FileCheckpointStore) -> None:
    msgs = (system("sys"), user("hi"), assistant("hello"))
    first = store.save(make(messages=msgs, label="test-checkpoint"))
    later = store.save(
        make(
            kind="step",
            messages=msgs[:2],
            step="model:1",
            output="x",
            turn_id="t1",
            details={"temperature": 0.42},
        )
    )
    listed = store.headers(S)
    assert [c.id for c in listed] == [first.id, later.id]
    assert core.latest(listed).id == later.id  # type: ignore[union-attr]
    again = store.get(S, first.id)
    assert again.messages == msgs and again.label == "test-checkpoint"
    step = store.get(S, later.id)
    assert (step.step, step.output, step.turn_id, step.details) == (
        "model:1",
        "x",
        "t1",
        {"temperature": 0.42},
    )
    assert checkpoint_doc(store.folder(S), first.id)["seq"] == 0


def test_messages_are_stored_once(store: FileCheckpointStore) -> None:
    history = [user(f"message {i}") for i in range(50)]
    for n in range(10, 51, 10):
        store.save(make(messages=tuple(history[:n])))
    objects = (store.folder(S) / "objects.jsonl").read_text().splitlines()
    assert len(objects) == 50
    last = store.headers(S)[-1]
    assert checkpoint_doc(store.folder(S), last.id)["messages"] == [[0, 49]]


def test_runs_round_trip() -> None:
    seqs = [0, 1, 2, 7, 8, 3, 10]
    assert encode_runs(seqs) == [[0, 2], [7, 8], [3, 3], [10, 10]]
    assert decode_runs(encode_runs(seqs)) == seqs


def test_unknown_version_is_listed_but_refused(store: FileCheckpointStore) -> None:
    saved = store.save(make(messages=(user("x"),)))
    path = edit_checkpoint(store.folder(S), saved.id, lambda d: json.dumps({**d, "version": 99}))
    listed = store.headers(S)
    assert len(listed) == 1 and not listed[0].readable and listed[0].format_version == 99
    with pytest.raises(UnknownFormatError, match="format version 99") as info:
        store.get(S, saved.id)
    assert info.value.exit_code == 3
    line = next(t for t in path.read_text().splitlines() if saved.id in t)
    store.save(make(messages=(user("y"),)))
    store.prune(S, keep_last=0)  # never pruned, never rewritten
    assert line in path.read_text().splitlines()
    assert [c.id for c in store.headers(S)] == [saved.id]


def test_wrongly_typed_checkpoint_is_listed_as_unreadable(store: FileCheckpointStore) -> None:
    saved = store.save(make())
    edit_checkpoint(store.folder(S), saved.id, lambda d: json.dumps({**d, "seq": 0, "kind": 7}))
    assert store.headers(S)[0].reason == "unreadable"
    with pytest.raises(CorruptDocumentError, match=r"checkpoints\.jsonl"):
        store.get(S, saved.id)


def test_a_torn_line_is_skipped_and_later_checkpoints_are_read(store: FileCheckpointStore) -> None:
    first = store.save(make(messages=(user("one"),)))
    pack = store.folder(S) / "checkpoints.jsonl"
    with pack.open("a") as handle:
        handle.write('{"format": "koog.checkpoint", "id": "dead')  # a kill mid-append
    second = fresh(store).save(make(messages=(user("two"),)))
    assert [c.id for c in fresh(store).headers(S)] == [first.id, second.id]
    assert fresh(store).get(S, second.id).messages[0].text == "two"


def test_torn_object_line_is_closed_off_before_the_next_append(store: FileCheckpointStore) -> None:
    store.save(make(messages=(user("a"),)))
    objects = store.folder(S) / "objects.jsonl"
    with objects.open("a") as handle:
        handle.write('{"s": 1, "h": "zz", "m": {"ro')
    fresh = FileCheckpointStore(store.data)
    saved = fresh.save(make(messages=(user("a"), user("b"))))
    assert [m.text for m in FileCheckpointStore(store.data).get(S, saved.id).messages] == ["a", "b"]


def test_prune_keeps_manual_and_newest(store: FileCheckpointStore) -> None:
    manual = store.save(make(manual=True, label="keep"))
    for _ in range(5):
        store.save(make())
        store.save(make(kind="step", step="load"))
    assert store.prune(S, keep_last=2) == 6
    kinds = [(c.kind, c.manual) for c in store.headers(S)]
    assert kinds.count(("restore", False)) == 2 and kinds.count(("step", False)) == 2
    assert manual.id in {c.id for c in store.headers(S)}


def test_files_are_private(store: FileCheckpointStore) -> None:
    store.save(make(messages=(user("x"),)))
    for path in store.folder(S).iterdir():
        assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(store.folder(S)).st_mode & 0o777 == 0o700


def test_interrupted_turn_is_the_latest_step_without_a_tombstone() -> None:
    load = make(kind="step", step="load", turn_id="t")
    model = make(kind="step", step="model:1", turn_id="t")
    tomb = make(kind="tombstone", turn_id="t")
    numbered = [
        Checkpoint(c.id, c.session, i, c.kind, c.created_at, step=c.step)
        for i, c in enumerate([load, model])
    ]
    assert core.interrupted_turn(numbered).step == "model:1"  # type: ignore[union-attr]
    done = [*numbered, Checkpoint(tomb.id, "cp", 2, "tombstone", tomb.created_at)]
    assert core.interrupted_turn(done) is None
    assert core.interrupted_turn([]) is None


def test_case39_same_timestamp_latest_by_seq() -> None:
    a = Checkpoint("a", "cp", 0, "step", "2023-01-01T00:00:00Z", step="load")
    b = Checkpoint("b", "cp", 1, "step", "2023-01-01T00:00:00Z", step="model:1")
    assert core.latest([b, a]).id == "b"  # type: ignore[union-attr]


def test_removed_calls_are_the_later_ones_newest_first() -> None:
    base = [
        user("create alex"),
        assistant(None, [ToolCall("1", "create_user", '{"name":"Alex"}')]),
        tool_result("1", "create_user", "ok"),
    ]
    later = [
        user("two more"),
        assistant(
            None,
            [
                ToolCall("2", "create_user", '{"name":"Daniel"}'),
                ToolCall("3", "create_user", '{"name":"Maria"}'),
            ],
        ),
        tool_result("2", "create_user", "ok"),
        tool_result("3", "create_user", "ok"),
    ]
    plan = [call for call, _message in core.removed_calls(base, base + later)]
    assert [c.arguments for c in plan] == ['{"name":"Maria"}', '{"name":"Daniel"}']
    assert core.is_prefix(base, base + later) and not core.is_prefix(base, later)
    # Not an earlier state, still reported: the calls it takes out, by id.
    assert [c.id for c, _m in core.removed_calls(base, later)] == ["3", "2"]
    assert core.removed_calls(base + later, base) == []


def test_resolve_id_by_prefix() -> None:
    found = [make(), make()]
    assert core.resolve_id(found, found[0].id) == [found[0]]
    assert core.resolve_id(found, found[1].id[:6]) == [found[1]]


def test_a_long_lived_store_notices_another_process_dropping_the_session(
    store: FileCheckpointStore,
) -> None:
    old = user("old")
    store.save(make(messages=(old,)))
    FileCheckpointStore(store.data).drop(S)  # another process: `koog history delete`
    saved = store.save(make(messages=(old, user("new"))))
    assert [m.text for m in FileCheckpointStore(store.data).get(S, saved.id).messages] == [
        "old",
        "new",
    ]


def test_compensation_journal_round_trip_and_update(store: FileCheckpointStore) -> None:
    call = ToolCall("c1", "create_user", '{"name": "bob"}')
    other = ToolCall("c2", "create_user", '{"name": "eve"}')
    store.record_compensations(
        S,
        [
            core.CompensationEntry(call, "pending", "p1", "t"),
            core.CompensationEntry(other, "pending", "p1", "t"),
        ],
    )
    store.record_compensations(S, [core.CompensationEntry(call, "running", "p1", "t2")], False)
    journal = store.folder(S) / "compensations.jsonl"
    with journal.open("a") as handle:
        handle.write('{"format": "koog.compensation", "call": {"fun')  # torn by a kill
    store.record_compensations(S, [core.CompensationEntry(call, "done", "p1", "t3")])
    entries = [(e.call, e.status, e.at) for e in store.compensations(S)]
    assert entries == [(call, "done", "t3"), (other, "pending", "t")]
    assert oct(journal.stat().st_mode & 0o777) == "0o600"
    store.drop(S)
    assert not journal.exists()


def test_compaction_keeps_what_live_checkpoints_use_and_never_reuses_seqs(
    store: FileCheckpointStore,
) -> None:
    kept_msgs = (user("keep me"), assistant("kept"))
    doomed = store.save(make(messages=(user("drop me"), assistant("dropped"))))
    kept = store.save(make(messages=kept_msgs))
    store.delete(S, doomed.id)
    objects = store.folder(S) / "objects.jsonl"
    assert objects.read_text().count('"drop me"') == 1
    assert store.compact(S) == 2
    assert '"drop me"' not in objects.read_text()
    assert store.get(S, kept.id).messages == kept_msgs
    fresh = store.save(make(messages=(user("new"),)))
    assert store.get(S, fresh.id).messages[0].text == "new"
    assert store.get(S, kept.id).messages == kept_msgs  # the freed seqs were not reused


def test_hostile_runs_are_refused_without_expanding_them(store: FileCheckpointStore) -> None:
    import time

    saved = store.save(make(messages=(user("a"), assistant("b"))))
    hostile = {"messages": [[0, 3_000_000_000]], "message_count": 3_000_000_001}
    edit_checkpoint(store.folder(S), saved.id, lambda d: json.dumps({**d, **hostile}))
    started = time.monotonic()
    with pytest.raises(CorruptDocumentError, match="refers to 3000000001 messages"):
        store.get(S, saved.id)
    assert time.monotonic() - started < 1


def fresh(store: FileCheckpointStore) -> FileCheckpointStore:
    """The same data dir as another process sees it: nothing cached."""
    return FileCheckpointStore(store.data)


def test_a_new_process_stores_against_the_index_without_duplicating_objects(
    store: FileCheckpointStore,
) -> None:
    history = tuple(user(f"message {i}") for i in range(50))
    first = store.save(make(messages=history))
    objects = store.folder(S) / "objects.jsonl"
    index = store.folder(S) / "objects.idx"
    size = objects.stat().st_size
    assert index.read_text().startswith(f"koog-objects-index 2 {objects.stat().st_ino}\n")
    second = fresh(store).save(make(messages=(*history, assistant("reply"))))
    assert objects.read_text().count('"message 7"') == 1  # found through the index
    assert objects.stat().st_size > size
    again = fresh(store)
    assert again.get(S, first.id).messages == history
    assert again.get(S, second.id).messages[-1].text == "reply"


@pytest.mark.parametrize(
    "damage",
    ["other inode", "covers more than the file", "torn last line", "garbage", "no mark"],
)
def test_a_stale_or_damaged_index_is_ignored_and_rewritten(
    store: FileCheckpointStore, damage: str
) -> None:
    history = tuple(user(f"m{i}") for i in range(5))
    saved = store.save(make(messages=history))
    index = store.folder(S) / "objects.idx"
    text = index.read_text()
    lines = text.splitlines()
    if damage == "other inode":
        text = text.replace(lines[0], "koog-objects-index 1 1")
    elif damage == "covers more than the file":
        text += "0 " + "f" * 24 + "\n@ 99999999\n"
    elif damage == "torn last line":
        text += "7 abc"
    elif damage == "garbage":
        text = "\n".join([lines[0], "zzz", *lines[1:]]) + "\n"
    else:
        text = "\n".join(line for line in lines if not line.startswith("@")) + "\n"
    index.write_text(text)
    other = fresh(store)
    extended = other.save(make(messages=(*history, assistant("more"))))
    objects = (store.folder(S) / "objects.jsonl").read_text()
    assert all(objects.count(f'"m{i}"') == 1 for i in range(5)), damage
    assert fresh(store).get(S, extended.id).messages[:5] == history
    assert fresh(store).get(S, saved.id).messages == history
    assert (
        index.read_text()
        .splitlines()[0]
        .endswith(str((store.folder(S) / "objects.jsonl").stat().st_ino))
    )


def test_pruning_shrinks_the_objects_file(store: FileCheckpointStore) -> None:
    from koogcli.adapters import checkpoint_objects

    objects = store.folder(S) / "objects.jsonl"
    for turn in range(30):
        store.save(make(messages=(user("x" * 20_000 + str(turn)),)))
    grown = objects.stat().st_size
    old_min = checkpoint_objects.COMPACT_MIN_BYTES
    try:
        checkpoint_objects.COMPACT_MIN_BYTES = 1024
        store.prune(S, 3)
    finally:
        checkpoint_objects.COMPACT_MIN_BYTES = old_min
    assert objects.stat().st_size < grown / 5
    newest = core.restore_points_newest_first(store.headers(S))[0]
    assert fresh(store).get(S, newest.id).messages[0].text.endswith("29")
    fresh(store).save(make(messages=(user("after compaction"),)))
    assert '"after compaction"' in objects.read_text()


def test_saves_that_extend_the_last_one_refer_to_the_same_objects_as_fresh_saves(
    store: FileCheckpointStore,
) -> None:
    """A turn's saves reuse the previous save's work for the messages they share; what
    they write must be exactly what a process without that shortcut writes."""
    import random

    rng = random.Random(3)
    history: list = [user("start")]
    for step in range(40):
        choice = rng.random()
        if choice < 0.6:
            history = [*history, assistant(f"a{step}")]  # the same objects, one more
        elif choice < 0.8:
            history = [user(m.text) for m in history]  # equal messages, new objects
        else:
            history = history[rng.randint(0, len(history)) :]
        saved = store.save(make(messages=tuple(history)))
        doc = checkpoint_doc(store.folder(S), saved.id)
        again = fresh(store).save(make(messages=tuple(history)))
        other = checkpoint_doc(store.folder(S), again.id)
        assert (doc["messages"], doc["digest"]) == (other["messages"], other["digest"]), step
        assert fresh(store).get(S, saved.id).messages == tuple(history)


def _as_separate_documents(store: FileCheckpointStore) -> list[Path]:
    """Turn the session's folder into what an earlier koog wrote: a document per file."""
    folder = store.folder(S)
    paths = []
    for line in (folder / "checkpoints.jsonl").read_text().splitlines():
        doc = json.loads(line)
        if "id" not in doc:
            continue  # the file's first line
        tag = "s" if doc["kind"] == "step" else "m" if doc["manual"] else "r"
        path = folder / f"{doc['seq']:08d}-{doc['id']}-{tag}.json"
        path.write_text(json.dumps(doc) + "\n")
        paths.append(path)
    (folder / "checkpoints.jsonl").unlink()
    (folder / "00000000-0-m.json").unlink()
    return paths


def test_separate_documents_of_an_earlier_koog_move_into_the_pack(
    store: FileCheckpointStore,
) -> None:
    old = [store.save(make(messages=(user(f"m{i}"),), manual=i == 1)) for i in range(3)]
    paths = _as_separate_documents(store)
    assert [c.id for c in fresh(store).headers(S)] == [c.id for c in old]  # read as they are
    new = fresh(store).save(make(messages=(user("new"),)))
    assert not any(p.exists() for p in paths)
    listed = fresh(store).headers(S)
    assert [(c.id, c.seq) for c in listed] == [*((c.id, c.seq) for c in old), (new.id, 3)]
    assert fresh(store).get(S, old[1].id).messages[0].text == "m1" and listed[1].manual


def test_the_marker_makes_an_earlier_koog_refuse_the_folder(store: FileCheckpointStore) -> None:
    """An earlier koog reads only `<seq>-<id>-<tag>.json` documents: it must see one it
    cannot use (never restoring, never compacting the objects under the pack) and must
    never prune it; documents it writes there are moved in after the others."""
    import re

    first = store.save(make(messages=(user("a"),)))
    folder = store.folder(S)
    names = [n for n in os.listdir(folder) if re.match(r"^(\d{8})-([0-9a-f]+)-([rmst])\.json$", n)]
    assert names == ["00000000-0-m.json"]  # tag m: manual, which no koog prunes
    marker = json.loads((folder / names[0]).read_text())
    assert (marker["format"], marker["version"], marker["kind"]) == (
        "koog.checkpoint",
        2,
        "restore",
    )
    assert [c.id for c in store.headers(S)] == [first.id]  # not listed here
    doc = {**checkpoint_doc(folder, first.id), "id": "abc123", "seq": 1}
    (folder / "00000001-abc123-r.json").write_text(json.dumps(doc))  # by an earlier koog
    second = fresh(store).save(make(messages=(user("b"),)))
    assert [(c.id, c.seq) for c in fresh(store).headers(S)] == [
        (first.id, 0),
        ("abc123", 1),
        (second.id, 2),
    ]
    assert not (folder / "00000001-abc123-r.json").exists()


def test_pruning_keeps_the_pack_small(store: FileCheckpointStore) -> None:
    history: list = []
    for i in range(250):  # about 180 KiB of lines appended in all
        history.append(user(f"question {i}"))
        store.save(make(messages=tuple(history)))
        store.prune(S, keep_last=10)
    pack = store.folder(S) / "checkpoints.jsonl"
    kept = {c.id for c in fresh(store).headers(S)}
    lines = [json.loads(line) for line in pack.read_bytes().splitlines()]
    live = sum(len(json.dumps(d)) + 1 for d in lines if d.get("id") in kept)
    assert len(kept) == 10
    assert pack.stat().st_size < 64 * 1024 + 2 * live
    assert fresh(store).get(S, fresh(store).headers(S)[0].id).messages == tuple(history[:241])


def test_the_check_by_hand_accepts_only_what_the_schema_accepts(
    store: FileCheckpointStore,
) -> None:
    """`checkpoint list` checks documents by hand, without pydantic: it must never use a
    document the schema refuses, nor read one differently."""
    from pydantic import ValidationError

    from koogcli.adapters.checkpoint_docs import valid as _valid
    from koogcli.adapters.document_schema import CHECKPOINT_DOC

    saved = store.save(make(kind="step", messages=(user("a"),), turn_id="t", step="load"))
    good = checkpoint_doc(store.folder(S), saved.id)
    fields = [k for k in good if k not in ("format", "version", "id", "session", "seq")]
    cases = [good, *damaged(good, [*fields, "messages.0", "messages.0.1", "details.x"])]
    accepted = 0
    for case in cases:
        try:
            expected = json.loads(json.dumps(CHECKPOINT_DOC.validate_python(case)))
        except ValidationError:
            assert _valid(case) is None, case
            continue
        accepted += 1
        read = json.loads(json.dumps(_valid(case)))
        assert {k: read[k] for k in expected} == expected, case  # pydantic drops the rest
    assert 10 < accepted < len(cases) - 100  # both kinds were tried


def test_an_index_of_many_turns_reads_only_what_was_written_whole() -> None:
    """Every store appends a block and an `@` line; a crash can tear an append, and the
    next append follows the closed-off piece. The reader must never read a block out of
    step (a digest with another message's seq), and reads all of an undamaged index."""
    import random

    from koogcli.adapters.checkpoint_objects import _index_lines, _read_index

    rng = random.Random(12)
    for _case in range(300):
        body, seq, offset, torn = "", 0, 0, False
        written: dict[str, int] = {}  # whole appends followed by their mark
        generated: dict[str, int] = {}  # every entry, torn appends' included
        expected: tuple[dict[str, int], int, int] | None = None
        for _append in range(rng.randint(0, 12)):
            entries: list[tuple[str | None, int]] = []
            for _ in range(rng.randint(0, 6)):
                if rng.random() < 0.1:
                    seq += rng.randint(0, 5)
                    entries.append((None, seq))
                else:
                    seq += rng.choice([1, 1, 1, 4])
                    entries.append((f"{rng.getrandbits(96):024x}", seq - 1))
            generated.update((k, s) for k, s in entries if k is not None)
            offset += rng.randint(0, 300)
            text = "".join(_index_lines(entries)) + f"@ {offset}\n"
            if rng.random() < 0.15:  # torn by a crash, closed off by the next append
                body += text[: rng.randrange(len(text))] + "\n"
                torn = True
                continue
            body += text
            if not torn:
                written.update((k, s) for k, s in entries if k is not None)
                nexts = [s for k, s in entries if k is None]
                prior = expected[1] if expected else 0
                top = max([prior, *nexts, *(s + 1 for k, s in entries if k is not None)])
                expected = (dict(written), top, offset)
        found = _read_index(body, 10**9)
        if not torn:
            assert found == expected, body
        elif found is not None:  # never a digest with another entry's seq
            assert all(generated[k] == s for k, s in found[0].items()), body

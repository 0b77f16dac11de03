"""core/agent_edits.py: which calls edit which files, the folder an agent works in, and
what a rollback sets each journalled file to (issue 47)."""

from __future__ import annotations

import json

from koogcli.core.agent_edits import Event, Journal, line_changes
from koogcli.core.edit_calls import edited_paths, working_folder
from koogcli.core.messages import ToolCall

PATCH = """*** Begin Patch
*** Add File: hello.txt
+hi
*** Update File: src/app.py
*** Move to: src/main.py
@@
-a
+b
*** Delete File: old.txt
*** End Patch"""


def call(name: str, arguments: object) -> ToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall("c1", name, text)


def test_each_agents_edit_tools_name_their_files() -> None:
    assert edited_paths(call("Write", {"file_path": "/w/a.txt", "content": "x"})) == ["/w/a.txt"]
    assert edited_paths(call("Edit", {"file_path": "/w/a.txt", "old_string": "a"})) == ["/w/a.txt"]
    assert edited_paths(call("NotebookEdit", {"notebook_path": "/w/n.ipynb"})) == ["/w/n.ipynb"]
    assert edited_paths(call("edit", {"filePath": "b.txt", "oldString": "a"})) == ["b.txt"]
    files = ["hello.txt", "src/app.py", "src/main.py", "old.txt"]
    assert edited_paths(call("apply_patch", {"input": PATCH})) == files
    assert edited_paths(call("apply_patch", {"patchText": PATCH})) == files
    assert edited_paths(call("apply_patch", PATCH)) == files  # a freeform tool's input
    heredoc = f"apply_patch <<'EOF'\n{PATCH}\nEOF\n"
    assert edited_paths(call("exec_command", {"cmd": heredoc})) == files
    assert edited_paths(call("shell", {"command": ["bash", "-lc", heredoc]})) == files


def test_other_calls_and_malformed_arguments_name_no_file() -> None:
    assert edited_paths(call("Bash", {"command": "echo hi > a.txt"})) == []
    assert edited_paths(call("Read", {"file_path": "/w/a.txt"})) == []
    assert edited_paths(call("Write", "[" * 5000)) == []  # too deep: stays text
    assert edited_paths(call("Write", {"file_path": 3})) == []
    assert edited_paths(call("exec_command", {"cmd": "ls"})) == []


def test_the_working_folder_as_each_agent_says_it() -> None:
    claude = "# Environment\n - Primary working directory: /tmp/w/proj\n - Is a git repository: no"
    assert working_folder([claude]) == "/tmp/w/proj"
    opencode = "<env>\n  Working directory: /home/u/p/\n  Workspace root folder: /home/u\n"
    assert working_folder([opencode]) == "/home/u/p"
    codex = "<environment_context>\n  <cwd>/srv/code</cwd>\n</environment_context>"
    assert working_folder(["", codex]) == "/srv/code"
    assert working_folder(["no folder here", "Working directory: relative/path"]) is None


def events(*raw: dict[str, object]) -> Journal:
    """Events as the journal reads them back: each at its own offset."""
    read = [{**e, "_offset": 100 * n} for n, e in enumerate(raw)]
    return Journal.of([e for e in map(Event.from_dict, read) if e is not None])


TWO_TURNS = (
    {"kind": "edit", "path": "/w/n.txt", "call": "w1", "before": None},  # 0
    {"kind": "edited", "path": "/w/n.txt", "call": "w1", "after": "d1"},  # 100
    {"kind": "edit", "path": "/w/n.txt", "call": "e2", "before": "d1"},  # 200
    {"kind": "edited", "path": "/w/n.txt", "call": "e2", "after": "d2"},  # 300
    {"kind": "edit", "path": "/w/m.txt", "call": "e2", "before": "m0"},  # 400
    {"kind": "edited", "path": "/w/m.txt", "call": "e2", "after": "m1"},  # 500
)


def test_a_point_sets_each_file_to_what_it_was_when_the_point_was_taken() -> None:
    journal = events(*TWO_TURNS)
    [m, n] = journal.moves(200, {"w1", "e2"}, {"w1"})  # the point before turn 2
    assert (n.path, n.expected, n.to, n.calls) == ("/w/n.txt", "d2", "d1", ("e2",))
    assert (m.path, m.expected, m.to) == ("/w/m.txt", "m1", "m0")
    [gone] = [x for x in journal.moves(0, {"w1", "e2"}, set()) if x.path == "/w/n.txt"]
    assert gone.to is None and gone.calls == ("e2", "w1")  # made by w1: removed
    assert journal.moves(600, {"w1", "e2"}, {"w1", "e2"}) == []


def test_after_a_compaction_the_file_goes_back_to_the_point_not_to_the_calls_left() -> None:
    """The history lost w1 and e2 to the agent's compaction; the point before turn 2
    still holds what the file was then ("d1"), not what the calls left in the history
    would say."""
    journal = events(
        *TWO_TURNS[:4],
        {"kind": "edit", "path": "/w/n.txt", "call": "e3", "before": "d2"},
        {"kind": "edited", "path": "/w/n.txt", "call": "e3", "after": "d3"},
    )
    [n] = journal.moves(200, {"e3"}, {"w1"})
    assert (n.expected, n.to) == ("d3", "d1")


def test_a_point_without_a_position_falls_back_to_the_calls_it_loses() -> None:
    journal = events(*TWO_TURNS)
    [m, n] = journal.moves(None, {"w1", "e2"}, {"w1"})
    assert (n.to, m.to) == ("d1", "m0")


def test_a_restore_moves_what_the_journal_knows_and_undoing_it_sets_the_file_forward() -> None:
    journal = events(
        *TWO_TURNS[:2],
        {"kind": "restore", "path": "/w/n.txt", "call": "w1", "point": "p",
         "before": "d1", "after": None, "status": "pending"},
        {"kind": "restore", "path": "/w/n.txt", "call": "w1", "point": "p",
         "before": "d1", "after": None, "status": "done"},
    )  # fmt: skip
    assert journal.pending == [] and journal.known["/w/n.txt"] is None
    [redo] = journal.moves(200, set(), {"w1"})  # the rollback's own point: before its restores
    assert (redo.expected, redo.to) == (None, "d1")


def test_another_members_edits_are_not_this_ones_to_undo() -> None:
    journal = events(
        {**TWO_TURNS[0], "session": "work"},
        {**TWO_TURNS[1], "session": "work"},
        {"kind": "edit", "path": "/w/n.txt", "call": "f1", "before": "d1", "session": "work~2"},
        {"kind": "edited", "path": "/w/n.txt", "call": "f1", "after": "f", "session": "work~2"},
    )
    mine = journal.of_member("work", {"w1"})
    [n] = mine.moves(0, {"w1"}, set())
    assert (n.expected, n.to) == ("d1", None)  # the file now holds "f": a change it refuses
    theirs = journal.of_member("work~2", {"w1", "f1"})  # inherited w1, made f1
    [f] = theirs.moves(200, {"w1", "f1"}, {"w1"})
    assert (f.expected, f.to) == ("f", "d1")


def test_a_file_that_outgrew_the_bound_is_never_moved_and_not_asked_about_again() -> None:
    journal = events(
        {"kind": "edit", "path": "/w/big", "call": "w1", "before": "b0"},
        {"kind": "uncovered", "path": "/w/big", "call": "w1", "why": "over"},
    )
    assert journal.moves(0, {"w1"}, set()) == []
    assert journal.unseen() == []


def test_a_patch_after_a_cd_is_not_followed_and_workdir_is() -> None:
    from koogcli.core.edit_calls import base_folder

    heredoc = f"apply_patch <<'EOF'\n{PATCH}\nEOF\n"
    assert base_folder(call("exec_command", {"cmd": heredoc, "workdir": "sub"}), "/w") == (
        "/w/sub",
        "",
    )
    folder, why = base_folder(call("exec_command", {"cmd": "cd sub && " + heredoc}), "/w")
    assert folder is None and "cd" in why
    assert base_folder(call("Write", {"file_path": "a"}), "/w") == ("/w", "")


def test_line_changes_count_what_a_diff_shows() -> None:
    assert line_changes(b"a\nb\nc\n", b"a\nB\nc\nd\n") == (2, 1)
    assert line_changes(None, b"one\ntwo\n") == (2, 0)

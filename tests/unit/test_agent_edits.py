"""core/agent_edits.py: which calls edit which files, the folder an agent works in, and
what a rollback sets each journalled file to (issue 47)."""

from __future__ import annotations

import json

from koogcli.core.agent_edits import Event, Journal, edited_paths, line_changes, working_folder
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
    return Journal.of([e for e in map(Event.from_dict, raw) if e is not None])


def test_rollback_sets_each_file_to_before_its_earliest_removed_edit() -> None:
    journal = events(
        {"kind": "edit", "path": "/w/n.txt", "call": "w1", "before": None},
        {"kind": "edited", "path": "/w/n.txt", "call": "w1", "after": "d1"},
        {"kind": "edit", "path": "/w/n.txt", "call": "e2", "before": "d1"},
        {"kind": "edited", "path": "/w/n.txt", "call": "e2", "after": "d2"},
        {"kind": "edit", "path": "/w/m.txt", "call": "e2", "before": "m0"},
        {"kind": "edited", "path": "/w/m.txt", "call": "e2", "after": "m1"},
    )
    [m, n] = journal.moves({"w1", "e2"}, {"w1"})
    assert (n.path, n.expected, n.to) == ("/w/n.txt", "d2", "d1")
    assert (m.path, m.expected, m.to) == ("/w/m.txt", "m1", "m0")
    [gone] = [x for x in journal.moves({"w1", "e2"}, set()) if x.path == "/w/n.txt"]
    assert gone.to is None and gone.calls == ("e2", "w1")  # made by w1: removed
    assert journal.moves({"w1"}, {"w1"}) == []


def test_a_restore_moves_what_the_journal_knows_and_a_rolled_back_rollback_redoes() -> None:
    journal = events(
        {"kind": "edit", "path": "/w/n.txt", "call": "w1", "before": None},
        {"kind": "edited", "path": "/w/n.txt", "call": "w1", "after": "d1"},
        {"kind": "restore", "path": "/w/n.txt", "call": "w1", "point": "p",
         "before": "d1", "after": None, "status": "pending"},
        {"kind": "restore", "path": "/w/n.txt", "call": "w1", "point": "p",
         "before": "d1", "after": None, "status": "done"},
    )  # fmt: skip
    assert journal.pending == [] and journal.known["/w/n.txt"] is None
    [redo] = journal.moves(set(), {"w1"})
    assert redo.redo and (redo.expected, redo.to) == (None, "d1")


def test_a_file_that_outgrew_the_bound_is_never_moved() -> None:
    journal = events(
        {"kind": "edit", "path": "/w/big", "call": "w1", "before": "b0"},
        {"kind": "uncovered", "path": "/w/big", "call": "w1", "why": "over"},
    )
    assert journal.moves({"w1"}, set()) == []


def test_line_changes_count_what_a_diff_shows() -> None:
    assert line_changes(b"a\nb\nc\n", b"a\nB\nc\nd\n") == (2, 1)
    assert line_changes(None, b"one\ntwo\n") == (2, 0)

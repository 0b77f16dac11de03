"""`history export --format html|markdown` (SPEC §5.17): one self-contained page, opened in
a real headless Chromium (Debian's package): it renders, requests nothing, and shows every
message; nothing a redact preprocessor hides is written."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]
EMAIL = "dana.scully@fbi.example"
MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": f"Write me a sorting function. Mail it to {EMAIL}."},
    {
        "role": "assistant",
        "content": "Here it is:\n\n```python\ndef order(items):\n    return sorted(items)\n```\n\n"
        "| name | speed |\n|---|---|\n| timsort | fast |\n| bogosort | slow |\n",
    },
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "run_tests", "arguments": '{"suite": "sorting"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "name": "run_tests", "content": "3 passed"},
    {"role": "assistant", "content": "All three tests pass. <script>alert(1)</script>"},
]
SUMMARY = "The user asked for a sorting function; it was written and tested."


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (Debian package `chromium`)")
        pytest.skip("chromium is not installed (Debian package `chromium`)")
    return found


def _browse(page: Path | str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Chromium, headless, on a page file or a URL."""
    return subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",  # the suite may run as root
            "--disable-gpu",
            "--no-first-run",
            # The browser's own traffic (updates, sync, spelling, time): off, so what the
            # net log shows is what the page asked for.
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--disable-domain-reliability",
            "--disable-client-side-phishing-detection",
            "--disable-features=Translate,OptimizationHints,MediaRouter,SpellCheck",
            "--no-pings",
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--window-size=1000,1800",
            *args,
            page if isinstance(page, str) else page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )


def _redacting(run_koog: Run, tmp_path: Path) -> Run:
    """koog with a redact preprocessor for e-mail addresses."""
    config = tmp_path / "redact.toml"
    config.write_text(
        '[[chat_memory.preprocessors]]\ntype = "redact"\n'
        "pattern = '[\\w.+-]+@[\\w-]+\\.[\\w.-]+'\nreplacement = \"[EMAIL]\"\n"
    )
    return lambda *args: run_koog(*args, env={"KOOG_CONFIG": str(config)})


def _page_requests(netlog: Path) -> list[str]:
    """Every URL the page itself asked for (the browser's own traffic, "not an origin",
    aside); checked to catch a page with an external image, which shows up here."""
    log = json.loads(netlog.read_text())
    kinds = {number: name for name, number in log["constants"]["logEventTypes"].items()}
    return [
        e["params"]["url"]
        for e in log["events"]
        if kinds.get(e["type"]) == "URL_REQUEST_START_JOB"
        and e.get("params", {}).get("url")
        and e["params"].get("initiator") != "not an origin"
    ]


def test_the_html_page_renders_offline_with_every_message_and_no_email(
    run_koog: Run, tmp_path: Path
) -> None:
    run_koog = _redacting(run_koog, tmp_path)
    document = tmp_path / "conversation.json"
    summary = {"role": "assistant", "content": SUMMARY, "meta": {"kind": "summary"}}
    document.write_text(json.dumps([*MESSAGES[:1], summary, *MESSAGES[1:]]))
    done = run_koog("history", "import", str(document), "-s", "share")
    assert done.returncode == 0, done.stderr
    page = tmp_path / "share.html"
    done = run_koog("history", "export", "-s", "share", "--format", "html", "-o", str(page))
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert EMAIL not in text and "[EMAIL]" in text
    assert "<script>" not in text  # a message's HTML is shown as text, never run
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)

    netlog = tmp_path / "net.json"
    shot = tmp_path / "share.png"
    shown = _browse(page, tmp_path, f"--screenshot={shot}", f"--log-net-log={netlog}")
    assert shot.exists() and shot.stat().st_size > 20_000, shown.stderr[-2000:]
    assert _page_requests(netlog) == []

    dom = _browse(page, tmp_path, "--dump-dom").stdout
    visible = html.unescape(re.sub(r"<[^>]+>", "", dom))
    for expected in (
        "Write me a sorting function. Mail it to [EMAIL]",  # the pattern takes the dot
        "def order(items):",
        "bogosort",
        "run_tests",
        '"suite": "sorting"',
        "3 passed",
        "All three tests pass. <script>alert(1)</script>",
        SUMMARY,
        "Compression summary",
        "share",
    ):
        assert expected in visible, expected
    assert "<table>" in dom and "<details>" in dom and '<span class="k">def</span>' in dom


def test_the_markdown_export_is_the_conversation_as_text(run_koog: Run, tmp_path: Path) -> None:
    run_koog = _redacting(run_koog, tmp_path)
    document = tmp_path / "conversation.json"
    document.write_text(json.dumps(MESSAGES))
    assert run_koog("history", "import", str(document), "-s", "md").returncode == 0
    done = run_koog("history", "export", "-s", "md", "--format", "markdown")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("# md\n") and EMAIL not in out and "[EMAIL]" in out
    assert "```python\ndef order(items):" in out and "Tool call `run_tests`" in out
    assert run_koog("history", "export", "-s", "md", "--format", "pdf").returncode == 2

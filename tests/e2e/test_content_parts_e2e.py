"""A session holding an image (SPEC §6 content parts), through the installed `koog`:
`history show` names it by its label, the next turn sends it to the upstream byte for byte
(with a redact preprocessor's text in place of the text part), and the HTML export shows it
inline in a real headless Chromium while the page requests nothing."""

from __future__ import annotations

import html
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.test_export_page_e2e import EMAIL, _browse, _page_requests, _redacting
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.images import data_url, has_run, image_part, square_png

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]
RED = (220, 20, 20)
PNG = data_url(square_png(64, RED))
LABEL = f"[image: image/png, {len(square_png(64, RED))} B]"
REMOTE = "http://images.example/elsewhere.png"
QUESTION = f"What is in this picture? Reply to {EMAIL} today."
PARTS = [{"type": "text", "text": QUESTION}, image_part(PNG), image_part(REMOTE)]
MESSAGES = [
    {"role": "user", "content": QUESTION, "meta": {"parts": PARTS}},
    {"role": "assistant", "content": "A red square."},
]


def _import(run_koog: Run, tmp_path: Path, session: str) -> None:
    document = tmp_path / "pictures.json"
    document.write_text(json.dumps(MESSAGES))
    done = run_koog("history", "import", str(document), "-s", session)
    assert done.returncode == 0, done.stderr


def test_history_show_names_the_image_and_json_keeps_the_parts(
    run_koog: Run, tmp_path: Path
) -> None:
    _import(run_koog, tmp_path, "pics")
    shown = run_koog("history", "show", "-s", "pics")
    assert shown.returncode == 0, shown.stderr
    assert (
        f"[user] {QUESTION}\n    {LABEL}\n    [image: from images.example]\n[assistant] A red square."
        in shown.stdout
    )
    assert "base64" not in shown.stdout
    markdown = run_koog("history", "show", "-s", "pics", "--format", "markdown").stdout
    assert f"{QUESTION}\n\n{LABEL}\n[image: from images.example]" in markdown
    stored = json.loads(run_koog("history", "show", "-s", "pics", "--json").stdout)
    assert stored[0]["meta"]["parts"] == PARTS


def test_the_next_turn_sends_the_image_byte_for_byte_with_the_text_redacted(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    run_koog = _redacting(run_koog, tmp_path)
    _import(run_koog, tmp_path, "turn")
    done = run_koog("chat", "-s", "turn", "And now?")
    assert (done.returncode, done.stdout) == (0, "echo: And now?\n"), done.stderr
    first = next(m for m in server.chat_requests[0]["messages"] if m["role"] == "user")
    assert first["content"][1:] == PARTS[1:]
    assert first["content"][1]["image_url"]["url"] == PNG  # byte for byte
    assert first["content"][0] == {"type": "text", "text": QUESTION.replace(EMAIL, "[EMAIL]")}
    assert EMAIL not in json.dumps(server.chat_requests[0])


def test_the_html_page_shows_the_image_inline_and_requests_nothing(
    run_koog: Run, tmp_path: Path
) -> None:
    run_koog = _redacting(run_koog, tmp_path)
    _import(run_koog, tmp_path, "page")
    page = tmp_path / "page.html"
    done = run_koog("history", "export", "-s", "page", "--format", "html", "-o", str(page))
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert REMOTE not in text  # an image elsewhere is named, never linked
    assert EMAIL not in text and "[EMAIL]" in text  # the text shown is the redacted one
    assert "img-src data:" in text

    netlog = tmp_path / "net.json"
    shot = tmp_path / "page.png"
    shown = _browse(page, tmp_path, f"--screenshot={shot}", f"--log-net-log={netlog}")
    assert shot.exists() and shot.stat().st_size > 10_000, shown.stderr[-2000:]
    assert _page_requests(netlog) == []
    assert has_run(shot.read_bytes(), RED, 64)  # drawn, not just named

    dom = _browse(page, tmp_path, "--dump-dom").stdout
    images = re.findall(r"<img [^>]*>", dom)
    assert len(images) == 1 and f'src="{PNG}"' in images[0]
    visible = html.unescape(re.sub(r"<[^>]+>", "", dom))
    for expected in (
        QUESTION.replace(EMAIL, "[EMAIL]"),
        LABEL,
        "[image: from images.example]",
        "A red square.",
    ):
        assert expected in visible, expected

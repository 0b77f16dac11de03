"""The page's routes in process (SPEC §6 "The page"): what a browser gets at `/` and what
a probe gets, the headers that keep stored text inert, the rule for actions (own origin,
the page's token), images served by the page itself, exports. The real Chromium drives
the page end to end in tests/e2e/test_page_e2e.py."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from koogcli.core.names import SessionName
from tests.fakes.chat_model import FakeChatModel

HTML = {"Accept": "text/html,application/xhtml+xml"}
ORIGIN = "http://127.0.0.1"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


@pytest.fixture
def served(make_ctx: Callable[..., Any]) -> Iterator[tuple[TestClient, Any]]:
    from koogcli.server.app import create_app
    from koogcli.server.state import ServerState

    ctx = make_ctx()
    state = ServerState(ctx, workers=4)
    with TestClient(create_app(state), base_url=ORIGIN) as client:
        yield client, ctx
    state.pool.shutdown(wait=True)


def _turn(client: TestClient, model: FakeChatModel, session: str, *said: object) -> None:
    """One turn per prompt, each request resending the conversation as clients do."""
    conversation: list[dict[str, Any]] = []
    for content in said:
        conversation.append({"role": "user", "content": content})
        model.enqueue("reply")
        answer = client.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": conversation},
            headers={"X-Koog-Session": session},
        )
        assert answer.status_code == 200, answer.text
        conversation.append({"role": "assistant", "content": "reply"})


def _token(page: str) -> str:
    found = re.search(r'name="koog-page-token" content="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def test_a_browser_gets_the_page_and_a_probe_what_it_always_got(
    served: tuple[TestClient, Any],
) -> None:
    client, _ = served
    page = client.get("/", headers=HTML)
    assert page.status_code == 200 and "<h1>Sessions</h1>" in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'self';")
    assert page.headers["x-frame-options"] == "DENY"
    assert "<script>" not in page.text and 'src="/ui/static/page.js"' in page.text
    probe = client.get("/")
    assert probe.status_code == 200 and probe.content == b""
    assert client.head("/").status_code == 200
    assert client.get("/ui/static/page.css").headers["content-type"].startswith("text/css")
    assert client.get("/ui/static/..%2Fscreens.py").status_code == 404


def test_stored_markup_is_escaped_and_links_are_inert(
    served: tuple[TestClient, Any], fake_model: FakeChatModel
) -> None:
    client, _ = served
    hostile = "<img src=x onerror=alert(1)><script>alert(2)</script> [a](javascript:alert(3))"
    _turn(client, fake_model, "h", hostile)
    page = client.get("/ui/session/h", headers=HTML).text
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert 'href="javascript:' not in page
    found = client.get("/ui/search", params={"q": "<script>alert(2)"}, headers=HTML).text
    assert "<script>alert" not in found and "&lt;script&gt;" in found


def test_an_action_needs_the_pages_own_origin_and_its_token(
    served: tuple[TestClient, Any], fake_model: FakeChatModel
) -> None:
    client, ctx = served
    _turn(client, fake_model, "w", "one", "two")
    token = _token(client.get("/ui/session/w", headers=HTML).text)
    url = "/ui/session/w/rollback"
    for headers in (
        {},  # no Origin: not a page's request
        {"Origin": "http://evil.example", "X-Koog-Page-Token": token},
        {"Origin": ORIGIN},
        {"Origin": ORIGIN, "X-Koog-Page-Token": token[:-1] + ("1" if token[-1] == "0" else "0")},
        {"Origin": ORIGIN, "X-Koog-Page-Token": token, "Sec-Fetch-Site": "cross-site"},
    ):
        refused = client.post(url, json={"confirmed": True}, headers=headers)
        assert refused.status_code == 403, (headers, refused.text)
    assert len(ctx.history.read(SessionName("w")).messages) == 5  # nothing happened
    good = {"Origin": ORIGIN, "X-Koog-Page-Token": token}
    asked = client.post(url, json={}, headers=good).json()
    assert asked["question"].startswith("roll w back to checkpoint")
    assert len(ctx.history.read(SessionName("w")).messages) == 5  # asking changes nothing
    done = client.post(url, json={"confirmed": True}, headers=good).json()
    assert done["done"][0].startswith("restored w to checkpoint")
    assert [m.text for m in ctx.history.read(SessionName("w")).messages][1:] == ["one", "reply"]


def test_an_image_is_served_by_the_page_and_an_svg_is_only_named(
    served: tuple[TestClient, Any], fake_model: FakeChatModel
) -> None:
    client, ctx = served
    svg = base64.b64encode(b"<svg onload='alert(1)'/>").decode()
    parts = [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/svg+xml;base64,{svg}"}},
    ]
    _turn(client, fake_model, "img", parts)
    page = client.get("/ui/session/img", headers=HTML).text
    [user] = [m for m in ctx.history.read(SessionName("img")).messages if m.role == "user"]
    assert f'src="/ui/session/img/part/{user.id}/1"' in page
    assert "[image: image/svg+xml" in page and f"/part/{user.id}/2" not in page
    image = client.get(f"/ui/session/img/part/{user.id}/1")
    assert image.headers["content-type"] == "image/png"
    assert image.content == base64.b64decode(PNG)
    assert "sandbox" in image.headers["content-security-policy"]
    assert client.get(f"/ui/session/img/part/{user.id}/2").status_code == 404


def test_exports_download_and_a_missing_session_is_said(
    served: tuple[TestClient, Any], fake_model: FakeChatModel
) -> None:
    client, _ = served
    _turn(client, fake_model, "e", "export me")
    md = client.get("/ui/session/e/export.md")
    assert md.headers["content-disposition"] == 'attachment; filename="e.md"'
    assert "export me" in md.text
    assert client.get("/ui/session/e/export.json").json()["session"] == "e"
    missing = client.get("/ui/session/nope", headers=HTML)
    assert missing.status_code == 404 and "no session named" in missing.text


def test_the_server_imports_no_template_or_markdown_code_until_a_page_is_asked() -> None:
    code = (
        "import sys\n"
        "from koogcli.server.app import create_app\n"
        "heavy = [m for m in ('jinja2', 'markdown_it', 'pygments') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

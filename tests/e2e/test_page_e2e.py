"""The page of `koog serve` (SPEC §6 "The page") in a real headless Chromium: sessions,
search, a session's turns with why, live updates, Roll back and Forget through the same
services as the command line, what a hostile message or page can do (nothing), a phone's
width and dark mode, and a token asked once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.browser import (
    PHONE,
    chromium,
    requested,
    screenshot,
    sideways_scroll,
    wait_for,
)
from tests.support.serving import KoogServe, http

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]
HOSTILE = (
    "look <img src=x onerror=window.pwned=1><script>window.pwned=2</script> "
    "[click me](javascript:window.pwned=3) ![pic](http://203.0.113.9/p.png)"
)


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def _base(served: KoogServe) -> str:
    return served.url.removesuffix("/v1")


def _said(run_koog: Run, name: str) -> list[tuple[str, str]]:
    shown = json.loads(_ok(run_koog("history", "show", "-s", name, "--json")))
    return [(m["role"], m["content"]) for m in shown if m["role"] != "system"]


def _text(driver: Any, selector: str) -> str:
    """What a person reads in the elements `selector` finds (read at once: live updates
    replace elements between two of selenium's calls)."""
    return str(
        driver.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0]))"
            ".map((e) => e.innerText).join(' ')",
            selector,
        )
    )


def _confirm(driver: Any, button: Any, ok: bool = True) -> str:
    """Click an action's button, wait for its question, answer it; the question."""
    from selenium.webdriver.common.by import By

    button.click()
    dialog = driver.find_element(By.ID, "confirm")
    wait_for(lambda: dialog.get_attribute("open") is not None)
    question = str(dialog.find_element(By.CSS_SELECTOR, ".question").text)
    answer = "#confirm-ok" if ok else 'button[value="cancel"]'
    dialog.find_element(By.CSS_SELECTOR, answer).click()
    wait_for(lambda: dialog.get_attribute("open") is None)
    return question


def test_the_page_lists_opens_searches_and_shows_a_new_turn_live(
    serve: KoogServe, run_koog: Run
) -> None:
    from selenium.webdriver.common.by import By

    _ok(run_koog("chat", "-s", "alpha", "tell me about zeppelins"))
    _ok(run_koog("chat", "-s", "beta", "what do walruses eat"))
    base = _base(serve)
    with chromium() as driver:
        driver.get(base + "/")
        listed = _text(driver, "#sessions")
        assert "alpha" in listed and "beta" in listed and "what do walruses eat" in listed
        driver.find_element(By.LINK_TEXT, "alpha").click()
        wait_for(lambda: "zeppelins" in _text(driver, "#turns"))
        assert "echo: tell me about zeppelins" in _text(driver, "#turns")

        driver.get(base + "/")
        driver.find_element(By.ID, "q").send_keys("walruses")
        link = wait_for(
            lambda: driver.find_elements(
                By.CSS_SELECTOR, '#found a[href^="/ui/session/beta?all=1#m-"]'
            )
        )[0]
        assert "walruses" in link.find_element(By.CSS_SELECTOR, "mark").text
        link.click()
        wait_for(lambda: "/ui/session/beta?all=1#m-" in driver.current_url)
        anchor = driver.current_url.rsplit("#", 1)[1]
        assert "walruses" in driver.find_element(By.ID, anchor).text

        driver.get(base + "/ui/session/alpha")
        wait_for(lambda: driver.find_element(By.ID, "live").is_displayed())
        driver.execute_script("window.notReloaded = true")
        _ok(run_koog("chat", "-s", "alpha", "and the hindenburg"))
        started = time.monotonic()
        wait_for(lambda: "echo: and the hindenburg" in _text(driver, "#turns"), timeout=5)
        assert time.monotonic() - started < 5
        assert driver.execute_script("return window.notReloaded") is True  # not reloaded


def test_roll_back_and_forget_from_the_page_are_what_the_command_line_sees(
    serve: KoogServe, run_koog: Run
) -> None:
    from selenium.webdriver.common.by import By

    _ok(run_koog("chat", "-s", "w", "one"))
    _ok(run_koog("chat", "-s", "w", "two"))
    kept = _ok(run_koog("memory", "add", "the hangar is north")).strip()
    gone = _ok(run_koog("memory", "add", "the password hint is swordfish")).strip()
    base = _base(serve)
    with chromium() as driver:
        driver.get(base + "/ui/session/w")
        latest = driver.find_element(By.CSS_SELECTOR, ".actions button[data-action=rollback]")
        # With the keyboard: Enter on the button asks, Escape declines; nothing happens.
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys

        latest.send_keys(Keys.ENTER)
        dialog = driver.find_element(By.ID, "confirm")
        wait_for(lambda: dialog.get_attribute("open") is not None)
        assert driver.switch_to.active_element.text == "Cancel"  # the safe answer first
        ActionChains(driver).send_keys(Keys.ESCAPE).perform()
        wait_for(lambda: dialog.get_attribute("open") is None)
        _confirm(driver, latest, ok=False)  # asked, cancelled: nothing happens
        assert _said(run_koog, "w")[-1] == ("assistant", "echo: two")

        question = _confirm(driver, latest)
        assert "roll w back to checkpoint" in question and "undoing" in question
        wait_for(lambda: "restored w to checkpoint" in _text(driver, "#status"))
        # `history show` agrees at once, as after `koog rollback --latest`
        assert _said(run_koog, "w") == [("user", "one"), ("assistant", "echo: one")]
        wait_for(lambda: "echo: two" not in _text(driver, "#turns"))

        driver.get(base + "/ui/memory")
        row = driver.find_element(By.ID, f"r-{gone}")
        question = _confirm(driver, row.find_element(By.CSS_SELECTOR, "button.danger"))
        assert "swordfish" in question
        wait_for(lambda: not driver.find_elements(By.ID, f"r-{gone}"))
    listed = json.loads(_ok(run_koog("memory", "list", "--json")))
    assert [r["id"] for r in listed] == [kept]
    undone = _ok(run_koog("rollback", "-s", "w", "--latest", "--yes"))  # the page's rollback
    assert "restored w" in undone or undone == ""
    assert _said(run_koog, "w")[-1] == ("assistant", "echo: two")  # undone like any other


def test_stored_markup_is_text_and_the_page_loads_only_from_itself(
    serve_files: KoogServe, run_koog: Run
) -> None:
    from selenium.webdriver.common.by import By

    _ok(run_koog("chat", "-s", "h", HOSTILE))
    base = _base(serve_files)
    with chromium() as driver:
        driver.get(base + "/ui/session/h")
        turns = driver.find_element(By.ID, "turns")
        assert "<script>window.pwned=2</script>" in turns.text  # shown as text
        assert "onerror=window.pwned=1" in turns.text
        time.sleep(0.5)
        assert driver.execute_script("return window.pwned") is None  # nothing ran
        assert not turns.find_elements(By.CSS_SELECTOR, "script, img[src='x'], iframe")
        for link in turns.find_elements(By.CSS_SELECTOR, "a"):
            href = link.get_attribute("href") or ""
            assert not href.startswith("javascript:")
            assert link.get_attribute("rel") == "noopener noreferrer"
        asked = requested(driver)
        assert asked and all(u.startswith(base + "/") for u in asked), asked

        # A page of another origin posts to the page's actions: refused, nothing changes.
        before = _said(run_koog, "h")
        attack = (
            "<script>for (const u of ['/ui/session/h/rollback', '/koog/v1/sessions/h/rollback'])"
            f"fetch('{base}' + u, {{method: 'POST', mode: 'no-cors', "
            "headers: {'content-type': 'text/plain'}, body: '{\"confirmed\": true}'});</script>"
        )
        driver.get("data:text/html," + attack)
        time.sleep(1)
        assert _said(run_koog, "h") == before
    answer = subprocess.run(
        ["curl", "-sS", "-D", "-", "-o", "/dev/null", "-H", "Accept: text/html", base + "/"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.lower()
    assert "content-security-policy: default-src 'self';" in answer
    for origin, token in (("http://evil.example", ""), (base, ""), (base, "x.1.y")):
        status, body = http(
            "POST",
            base + "/ui/session/h/rollback",
            {"confirmed": True},
            {"Origin": origin, "X-Koog-Page-Token": token},
        )
        assert status == 403, body
    assert _said(run_koog, "h") == before


def test_memory_records_and_why_and_an_agents_file_edits_show(
    koog_env: dict[str, str],
    server: FakeOpenAIServer,
    isolated: Path,
    run_koog: Run,
) -> None:
    from selenium.webdriver.common.by import By

    config = isolated / "memory.toml"
    config.write_text('[long_term_memory.retrieval]\nenabled = true\nmode = "fulltext"\n')
    env = {**koog_env, "KOOG_CONFIG": str(config)}
    record = _ok(run_koog("memory", "add", "the zeppelin hangar is north", env=env)).strip()
    _ok(run_koog("chat", "-s", "m", "where is the zeppelin", env=env))
    work = isolated / "work"
    work.mkdir()
    served = KoogServe(env).start()
    try:
        _agent_writes(served, server, work / "notes.txt")
        base = _base(served)
        with chromium() as driver:
            driver.get(base + "/ui/session/m")
            why = driver.find_element(By.CSS_SELECTOR, "details.why")
            why.find_element(By.TAG_NAME, "summary").click()
            table = why.find_element(By.CSS_SELECTOR, "table.records").text
            assert "the zeppelin hangar is north" in table and record[:8] in table
            assert "memory record" in why.find_element(By.TAG_NAME, "summary").text
            assert "long-term memory: 1 record from default by fulltext" in why.text

            driver.get(base + "/ui/session/claude-p1")
            assert "created notes.txt (+1 \u22120)" in _text(driver, "#turns .edits")
            assert "sets back" in _text(driver, "#points") and "notes.txt" in _text(
                driver, "#points"
            )
            assert "Claude Code" in _text(driver, ".session-head")
    finally:
        assert served.stop() == 0


def _agent_writes(served: KoogServe, server: FakeOpenAIServer, path: Path) -> None:
    """Claude Code's requests by hand: the model calls Write, the agent writes the file."""
    base = served.url.removesuffix("/v1")
    headers = {"anthropic-version": "2023-06-01", "x-claude-code-session-id": "p1"}
    tool = {
        "name": "Write",
        "description": "Write a file",
        "input_schema": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
        },
    }
    said: list[dict[str, Any]] = [{"role": "user", "content": "write notes.txt"}]
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": f" - Primary working directory: {path.parent}"}],
        "tools": [tool],
    }
    call = {"file_path": str(path), "content": "new\n"}
    server.enqueue(
        {"tool_calls": [{"id": "toolu_1", "name": "Write", "arguments": json.dumps(call)}]}
    )
    status, reply = http("POST", f"{base}/v1/messages", {**body, "messages": said}, headers)
    assert status == 200, reply
    path.write_text("new\n")
    [use] = [b for b in reply["content"] if b["type"] == "tool_use"]
    said += [
        {"role": "assistant", "content": reply["content"]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "ok"}],
        },
    ]
    server.enqueue({"content": "Wrote it."})
    status, reply = http("POST", f"{base}/v1/messages", {**body, "messages": said}, headers)
    assert status == 200, reply


def test_a_phones_width_needs_no_sideways_scroll_in_light_or_dark(
    serve_files: KoogServe, run_koog: Run, tmp_path: Path
) -> None:
    """Screenshots go to $PAGE_SHOTS (else the test's folder) for a person to see."""
    long_line = "a-very-long-unbroken-word-" * 12
    _ok(
        run_koog(
            "chat", "-s", "phone", f"## Plan\n\n{long_line}\n\n```python\nprint('{long_line}')\n```"
        )
    )
    _ok(run_koog("memory", "add", f"remember {long_line}"))
    shots = Path(os.environ.get("PAGE_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    base = _base(serve_files)
    for width, dark in ((PHONE[0], False), (PHONE[0], True), (1280, False), (1280, True)):
        with chromium(width, dark) as driver:
            for name, path in (
                ("sessions", "/"),
                ("session", "/ui/session/phone"),
                ("memory", "/ui/memory"),
            ):
                driver.get(base + path)
                assert driver.execute_script("return window.innerWidth") == width
                assert sideways_scroll(driver) <= 0, (name, width)
                background = driver.execute_script(
                    "return getComputedStyle(document.body).backgroundColor"
                )
                assert (background == "rgb(13, 17, 23)") == dark, background
                scheme = "dark" if dark else "light"
                screenshot(driver, str(shots / f"{name}-{width}-{scheme}.png"), width)


def test_a_token_is_asked_once_and_kept_in_an_httponly_strict_cookie(
    koog_env: dict[str, str], isolated: Path, run_koog: Run
) -> None:
    from selenium.webdriver.common.by import By

    config = isolated / "tokens.toml"
    config.write_text(
        '[[serve.tokens]]\nname = "dana"\ntoken = "tok-dana-1234567890"\n'
        'sessions = ["t"]\nnamespaces = ["default"]\n'
    )
    env = {**koog_env, "KOOG_CONFIG": str(config)}
    _ok(run_koog("chat", "-s", "t", "hello there", env=env))
    _ok(run_koog("chat", "-s", "secret", "not for dana", env=env))
    served = KoogServe(env).start()
    try:
        base = _base(served)
        with chromium() as driver:
            driver.get(base + "/")
            assert "needs a token" in _text(driver, "h1")
            field = driver.find_element(By.ID, "token")
            field.send_keys("wrong-token")
            field.submit()
            wait_for(lambda: "not one this server knows" in _text(driver, "#status"))
            field.clear()
            field.send_keys("tok-dana-1234567890")
            driver.find_element(By.CSS_SELECTOR, "#login button").click()
            wait_for(lambda: "hello there" in _text(driver, "#sessions"))
            assert "not for dana" not in _text(driver, "body")  # her sessions only
            [cookie] = driver.get_cookies()
            assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
            assert driver.execute_script("return document.cookie") == ""
            driver.get(base + "/ui/session/t")  # kept: not asked again
            assert "echo: hello there" in _text(driver, "#turns")
            driver.get(base + "/ui/session/secret")
            assert "not for dana" not in _text(driver, "body")
    finally:
        assert served.stop() == 0


def test_koog_ui_starts_serve_once_and_prints_the_page(
    koog_env: dict[str, str], run_koog: Run
) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    first = run_koog("ui", "--no-open", "--port", str(port))
    assert first.returncode == 0, first.stderr
    pid = int(first.stderr.split("(pid ", 1)[1].split(",", 1)[0])
    try:
        assert first.stdout.strip() == f"http://127.0.0.1:{port}/"
        again = run_koog("ui", "--no-open", "--port", str(port))
        assert again.returncode == 0 and "started" not in again.stderr
        assert again.stdout == first.stdout
        page = subprocess.run(
            ["curl", "-sS", "-H", "Accept: text/html", first.stdout.strip()],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        assert "<h1>Sessions</h1>" in page
    finally:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)


def test_who_connects_is_told_by_the_socket_not_by_forwarded_headers(
    serve_files: KoogServe, run_koog: Run
) -> None:
    """uvicorn trusts X-Forwarded-For from loopback by default: the owner check then looked
    up the port a header named, so another local user could pass as the owner."""
    _ok(run_koog("chat", "-s", "f", "hello"))
    base = _base(serve_files)
    for forged in ("127.0.0.1:1", "10.0.0.9:4242"):
        status, listed = http(
            "GET", base + "/koog/v1/sessions", headers={"X-Forwarded-For": forged}
        )
        assert status == 200 and [s["session"] for s in listed] == ["f"], (forged, listed)
    answer = subprocess.run(
        [
            "curl",
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            base + "/ui/session/%3Cb%3Ex/part/a/0",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert answer.stdout == "404"

"""`koog chat` in pipelines (SPEC §2 "Pipelines"), the installed binary against the test
server: `--schema` / `--schema-multi` (asked, checked, retried once, printed alone),
images and PDFs as each protocol's content parts, `-x` / `--extract-last`, `-o` typed,
templates (`--save`, `-t`, `-p`, `$input`, `koog templates`)."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.images import square_png

pytestmark = pytest.mark.e2e

Run = Callable[..., subprocess.CompletedProcess[str]]
ADA = {"name": "Ada Lovelace", "age": 36, "bio": "a mathematician"}
PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def _wired(tmp_path: Path, server: FakeOpenAIServer, wire: str) -> dict[str, str]:
    config = tmp_path / f"{wire}.toml"
    config.write_text(
        f'[llm]\nmodel = "m-{wire}"\nbase_url = "{server.base_url}"\nwire_api = "{wire}"\n'
    )
    return {"KOOG_CONFIG": str(config)}


def test_a_schema_gives_the_json_alone_and_the_request_carries_it(
    run_koog: Run, server: FakeOpenAIServer
) -> None:
    server.enqueue({"content": json.dumps(ADA)})
    done = run_koog("chat", "--schema", "name, age int, bio: a short bio", "Ada Lovelace was 36")
    assert json.loads(_ok(done))["age"] == 36  # `| jq .age`
    assert done.stdout == json.dumps(ADA) + "\n"
    sent = server.chat_requests[-1]["response_format"]
    assert sent["type"] == "json_schema"
    properties = sent["json_schema"]["schema"]["properties"]
    assert properties["age"] == {"type": "integer"}
    assert properties["bio"] == {"type": "string", "description": "a short bio"}

    server.enqueue({"content": json.dumps({"items": [ADA, {**ADA, "name": "Mary"}]})})
    many = json.loads(_ok(run_koog("chat", "--schema-multi", "name, age int, bio", "two people")))
    assert [p["name"] for p in many["items"]] == ["Ada Lovelace", "Mary"]
    schema = server.chat_requests[-1]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["items"]["type"] == "array"


def test_a_reply_that_never_fits_is_exit_1_and_one_that_fits_on_retry_is_stored(
    run_koog: Run, server: FakeOpenAIServer
) -> None:
    server.enqueue({"content": "Sure! Ada was 36."}, {"content": '{"name": "Ada"}'})
    never = run_koog("chat", "-s", "p", "--schema", "name, age int", "Ada was 36")
    assert never.returncode == 1 and never.stdout == ""
    assert "does not fit the schema" in never.stderr and "'age' is a required" in never.stderr
    told = [m for m in server.chat_requests[-1]["messages"] if m["role"] == "user"][-1]
    assert "not a JSON document" in told["content"]  # the retry said what was wrong
    assert run_koog("history", "show", "-s", "p").returncode == 2  # nothing stored

    server.enqueue({"content": "Ada, 36"}, {"content": '```json\n{"name": "Ada", "age": 36}\n```'})
    fits = run_koog("chat", "-s", "q", "--schema", "name, age int", "Ada was 36")
    assert json.loads(_ok(fits)) == {"name": "Ada", "age": 36}
    stored = json.loads(_ok(run_koog("history", "show", "-s", "q", "--json")))
    said = [(m["role"], m["content"]) for m in stored if m["role"] != "system"]
    assert said == [
        ("user", "Ada was 36"),
        ("assistant", '```json\n{"name": "Ada", "age": 36}\n```'),
    ]
    assert stored[-1]["meta"]["schema"]["required"] == ["name", "age"]
    assert "structured output:" in _ok(run_koog("why", "-s", "q"))


def test_a_schema_over_the_messages_api_is_a_forced_tool(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    call = {"id": "toolu_1", "name": "structured_answer", "arguments": json.dumps(ADA)}
    server.enqueue({"tool_calls": [call]})
    env = _wired(tmp_path, server, "messages")
    done = run_koog("chat", "--schema", "name, age int, bio", "Ada", env=env)
    assert json.loads(_ok(done)) == ADA
    body = server.requests[-1]
    assert body["tool_choice"] == {"type": "tool", "name": "structured_answer"}
    [tool] = [t for t in body["tools"] if t["name"] == "structured_answer"]
    assert tool["input_schema"]["properties"]["age"] == {"type": "integer"}


@pytest.mark.parametrize("wire", ["chat", "responses", "messages"])
def test_images_and_pdfs_go_as_each_protocols_parts(
    wire: str, run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    png = square_png(8)
    (tmp_path / "pix.png").write_bytes(png)
    (tmp_path / "doc.pdf").write_bytes(PDF)
    env = _wired(tmp_path, server, wire)
    args = ("chat", "-s", "img", "-a", "pix.png", "-a", "doc.pdf", "what are these")
    _ok(run_koog(*args, env=env))
    body = server.requests[-1]
    encoded, pdf = base64.b64encode(png).decode(), base64.b64encode(PDF).decode()
    if wire == "chat":
        [user] = [m for m in body["messages"] if m["role"] == "user"]
        kinds = [p["type"] for p in user["content"]]
        assert kinds == ["text", "image_url", "file"]
        assert user["content"][1]["image_url"]["url"] == f"data:image/png;base64,{encoded}"
        assert user["content"][2]["file"]["file_data"] == f"data:application/pdf;base64,{pdf}"
    elif wire == "responses":
        [user] = [i for i in body["input"] if i.get("role") == "user"]
        assert [p["type"] for p in user["content"]] == ["input_text", "input_image", "input_file"]
        assert user["content"][1]["image_url"].startswith("data:image/png;base64,")
    else:
        [user] = [m for m in body["messages"] if m["role"] == "user"]
        blocks = [b["type"] for b in user["content"]]
        assert blocks == ["text", "image", "document"]
        assert user["content"][1]["source"]["data"] == encoded
        assert user["content"][2]["source"]["media_type"] == "application/pdf"
    shown = _ok(run_koog("history", "show", "-s", "img", env=env))
    assert f"[image: image/png, {len(png)} B]" in shown and "[file: application/pdf" in shown


def test_stdin_as_an_image_and_a_file_that_is_neither_text_nor_media(
    run_koog: Run, server: FakeOpenAIServer, koog_env: dict[str, str], tmp_path: Path
) -> None:
    done = subprocess.run(
        ["koog", "chat", "-a", "-", "describe it"],
        input=square_png(4),
        capture_output=True,
        env=koog_env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    [user] = [m for m in server.chat_requests[-1]["messages"] if m["role"] == "user"]
    assert [p["type"] for p in user["content"]] == ["text", "image_url"]
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    bad = run_koog("chat", "-a", "blob.bin", "what")
    assert bad.returncode == 2 and "neither text nor an image, PDF or audio" in bad.stderr


def test_extract_prints_a_fenced_block_and_options_arrive_typed(
    run_koog: Run, server: FakeOpenAIServer
) -> None:
    reply = (
        "Try this:\n\n```sh\necho hi | wc -c\n```\n\nor in Python:\n\n```python\nprint(3)\n```\n"
    )
    server.enqueue({"content": reply}, {"content": reply}, {"content": "no code here"})
    assert _ok(run_koog("chat", "-x", "count bytes")) == "echo hi | wc -c\n"
    assert _ok(run_koog("chat", "--extract-last", "count bytes")) == "print(3)\n"
    assert _ok(run_koog("chat", "-x", "count bytes")) == "no code here\n"  # no block: all
    server.enqueue({"content": "ok"})
    options = ("-o", "temperature", "0.3", "-o", "seed", "7", "-o", "logprobs", "true")
    _ok(run_koog("chat", "-s", "opt", *options, "-o", "stop", "###", "go"))
    body = server.chat_requests[-1]
    assert (body["temperature"], body["seed"], body["logprobs"], body["stop"]) == (
        0.3,
        7,
        True,
        "###",
    )
    assert "options: temperature=0.3, seed=7, logprobs=True, stop='###'" in _ok(
        run_koog("why", "-s", "opt")
    )
    bad = run_koog("chat", "-o", "seed", "--", "go")
    assert bad.returncode == 2


def test_templates_save_list_and_fill(
    run_koog: Run, server: FakeOpenAIServer, koog_env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "templates.toml"
    config.write_text("# my settings\n[chat]\nmarkdown = false\n")
    env = {"KOOG_CONFIG": str(config)}
    before = len(server.requests)
    _ok(run_koog("chat", "--save", "fr", "--system", "Reply in French", env=env))
    _ok(run_koog("chat", "--save", "greet", "Greet $name warmly", "-o", "seed", "3", env=env))
    assert len(server.requests) == before  # saving calls no model
    assert config.read_text().startswith("# my settings\n")  # the file's own lines kept
    again = run_koog("chat", "--save", "fr", "--system", "x", env=env)
    assert again.returncode == 2 and "--force" in again.stderr
    listed = json.loads(_ok(run_koog("templates", "--json", env=env)))
    assert [t["name"] for t in listed] == ["fr", "greet"]

    done = subprocess.run(
        ["koog", "chat", "-t", "fr"],
        input="hi",
        capture_output=True,
        text=True,
        env={**koog_env, **env},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    sent = server.chat_requests[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "Reply in French"}
    assert sent[-1]["content"] == "hi"
    _ok(run_koog("chat", "-t", "greet", "-p", "name", "Ada", env=env))
    body = server.chat_requests[-1]
    assert body["messages"][-1]["content"] == "Greet Ada warmly" and body["seed"] == 3
    missing = run_koog("chat", "-t", "greet", env=env)
    assert missing.returncode == 2 and "$name" in missing.stderr and "-p name" in missing.stderr
    _ok(run_koog("chat", "--save", "fr", "--force", "--system", "Réponds en français", env=env))
    _ok(run_koog("chat", "-t", "fr", "bonjour", env=env))
    assert server.chat_requests[-1]["messages"][0]["content"] == "Réponds en français"


def test_a_url_attachment_is_fetched_within_the_bound_and_model_defaults_apply(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    import functools
    import http.server
    import threading

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "chart.png").write_bytes(square_png(8))
    (tmp_path / "site" / "big.png").write_bytes(square_png(8) + b"\0" * 4096)
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "site")
    )
    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    config = tmp_path / "bounded.toml"
    config.write_text(
        '[llm]\nmodel = "vision"\n[chat]\nmax_attachment_bytes = 2048\n'
        '[models."vision"]\noptions = { seed = 11, top_p = 0.5 }\n'
    )
    env = {"KOOG_CONFIG": str(config)}
    try:
        base = f"http://127.0.0.1:{site.server_address[1]}"
        _ok(
            run_koog(
                "chat",
                "-m",
                "vision",
                "-a",
                f"{base}/chart.png",
                "-o",
                "top_p",
                "0.9",
                "q",
                env=env,
            )
        )
        body = server.chat_requests[-1]
        [user] = [m for m in body["messages"] if m["role"] == "user"]
        assert user["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
        assert (body["seed"], body["top_p"]) == (11, 0.9)  # the model's default, -o over it
        big = run_koog("chat", "-a", f"{base}/big.png", "what", env=env)
        assert big.returncode == 2 and "max_attachment_bytes" in big.stderr
        gone = run_koog("chat", "-a", f"{base}/missing.png", "what", env=env)
        assert gone.returncode == 2 and "cannot fetch attachment" in gone.stderr
    finally:
        site.shutdown()


def test_a_model_that_takes_no_images_is_one_line_with_a_hint(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    (tmp_path / "pix.png").write_bytes(square_png(8))
    said = "Invalid content type. image_url is only supported by certain models."
    server.enqueue({"status": 400, "message": said, "type": "invalid_request_error"})
    done = run_koog("chat", "-a", "pix.png", "what is it")
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert said in lines[-2] and "may not take images" in lines[-1], done.stderr


@pytest.mark.parametrize(
    ("wire", "limit"), [("responses", "max_output_tokens"), ("messages", "max_tokens")]
)
def test_options_reach_every_protocol_as_given(
    wire: str, limit: str, run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    env = _wired(tmp_path, server, wire)
    options = ("-o", "seed", "7", "-o", "max_tokens", "50", "-o", "temperature", "0.4")
    _ok(run_koog("chat", *options, "-o", "service_tier", "auto", "hi", env=env))
    body = server.requests[-1]
    assert (body["seed"], body[limit], body["temperature"]) == (7, 50, 0.4)
    assert body["service_tier"] == "auto"


def test_what_would_be_lost_or_misread_is_refused_before_any_request(
    run_koog: Run, server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Each of these once ran with part of the command line silently dropped."""
    (tmp_path / "a.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\0" * 32)
    (tmp_path / "nulls.json").write_text('{"type": "object", "default": null}')
    real = tmp_path / "dotfiles" / "koog.toml"
    real.parent.mkdir()
    real.write_text("# kept\n")
    (tmp_path / "link.toml").symlink_to(real)
    before = len(server.requests)
    refused = {
        "-o temperature hot": ("chat", "-o", "temperature", "hot", "hi"),
        "-o model": ("chat", "-o", "model", "other", "hi"),
        "-o NaN": ("chat", "-o", "x", "NaN", "hi"),
        "-p without -t": ("chat", "-p", "name", "Ada", "hi"),
        "-x with --json": ("chat", "-x", "--json", "hi"),
        "empty schema": ("chat", "--schema", "", "hi"),
        "missing schema file": ("chat", "--schema", "nope.schema.json", "hi"),
        "--save with -a": ("chat", "--save", "t", "-a", "a.wav", "hi"),
        "a stray $": ("chat", "--save", "price", "It costs $5"),
        "null in TOML": ("chat", "--save", "n", "--schema", "nulls.json", "x"),
    }
    for what, args in refused.items():
        done = run_koog(*args)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (what, done.stderr)
        assert "internal error" not in done.stderr, (what, done.stderr)
    audio = run_koog("chat", "-a", "a.wav", "hear", env=_wired(tmp_path, server, "messages"))
    assert audio.returncode == 2 and "takes no audio" in audio.stderr
    assert len(server.requests) == before  # nothing was sent
    _ok(run_koog("chat", "--save", "s", "hello", env={"KOOG_CONFIG": str(tmp_path / "link.toml")}))
    assert (tmp_path / "link.toml").is_symlink() and "[templates.s]" in real.read_text()
    assert real.read_text().startswith("# kept\n")
    server.enqueue({"content": 'Here it is:\n\n```json\n{"age": 36}\n```\n\nAnything else?'})
    assert json.loads(_ok(run_koog("chat", "--schema", "age int", "how old"))) == {"age": 36}

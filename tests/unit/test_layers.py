"""Every module's imports obey HOUSE_STYLE §1's dependency rules (checked on the AST)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "koogcli"

THIRD_PARTY_HOMES = {
    "typer": ("cli",),
    "rich": ("ui",),
    "prompt_toolkit": ("repl",),
    "openai": (),  # the wire clients speak HTTP themselves (adapters/model/native_http.py)
    "anthropic": (),
    "orjson": (
        "adapters/model/native_http.py",
        "adapters/atomic.py",
        "server/bodies.py",
        "adapters/stores/lines.py",
        "adapters/sql/transcript_writer.py",
    ),
    "platformdirs": ("adapters/paths.py",),
    "pydantic": ("config", "adapters"),
    "tomli_w": ("services/config_info.py",),
    "regex": ("adapters/tools/bounded_regex.py",),
    "psycopg": ("adapters/postgres",),
    "pgvector": ("adapters/postgres",),
    "starlette": ("server",),
    "uvicorn": ("cli/serve.py", "server/connections.py"),
    "markdown_it": ("ui/html_text.py",),
    "pygments": ("ui/html_text.py",),
    "jinja2": ("server/page/routes.py",),
    "markupsafe": ("server/page/routes.py",),
    "selenium": (),  # tests only
    "jsonschema": ("services/structured_output.py",),
}
ALLOWED_INTERNAL = {
    "core": {"core"},
    "config": {"config", "core"},
    "adapters": {"adapters", "core"},
    "services": {"services", "core", "config"},
    "ui": {"ui", "core"},
    "cli": {"cli", "ui", "services", "core", "repl", "server"},
    "server": {"server", "ui", "services", "core", "config"},
    "repl": {"repl", "ui", "services", "core"},
}


def imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_imports_follow_the_layers(path: Path) -> None:
    rel = path.relative_to(PACKAGE).as_posix()
    layer = rel.split("/")[0]
    for name in imports(path):
        top = name.split(".")[0]
        if top == "koogcli":
            parts = name.split(".")
            if len(parts) < 2 or parts[1] in ("__init__",):
                continue
            target = parts[1]
            allowed = ALLOWED_INTERNAL[layer]
            root = rel in ("services/compose.py", "services/compose_models.py")
            ok = target in allowed or (root and target == "adapters")
            assert ok, f"{rel} imports {name}"
        elif top in THIRD_PARTY_HOMES:
            homes = THIRD_PARTY_HOMES[top]
            assert any(rel == h or rel.startswith(h + "/") for h in homes), f"{rel} imports {top}"


def test_no_module_over_500_lines() -> None:
    long = [p.name for p in PACKAGE.rglob("*.py") if len(p.read_text().splitlines()) > 500]
    assert long == []


UI_MODULES = sorted((PACKAGE / "ui").glob("*.py"))


@pytest.mark.parametrize("path", UI_MODULES, ids=lambda p: p.name)
def test_what_services_hand_to_ui_is_typed(path: Path) -> None:
    """HOUSE_STYLE §1: ui/ takes typed values. No public function or method of ui/ takes
    or returns `Any` (rich's own objects, kept private, may be)."""
    untyped = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith(
            "_"
        ):
            annotations = [a.annotation for a in [*node.args.args, *node.args.kwonlyargs]]
            for annotation in [*annotations, node.returns]:
                if annotation is not None and "Any" in ast.unparse(annotation):
                    untyped.append(f"{node.name}: {ast.unparse(annotation)}")
    assert untyped == []


def _load_time_imports(path: Path) -> set[str]:
    """The koogcli modules a module imports as it loads: module-level statements only (an
    import inside a function, or under `if TYPE_CHECKING`, runs later or never)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("koogcli.")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("koogcli."):
            found.add(str(node.module))
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def test_no_import_cycles_at_load_time() -> None:
    def name_of(path: Path) -> str:
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(p): p for p in PACKAGE.rglob("*.py")}

    def own(name: str, target: str) -> bool:  # a module's own package is loaded before it
        return target == name or name.startswith(target + ".")

    graph = {
        name: {m for m in _load_time_imports(path) if m in modules and not own(name, m)}
        for name, path in modules.items()
    }
    for name in list(graph):  # importing a.b.c loads a.b first
        parent = name.rsplit(".", 1)[0]
        for target in list(graph[name]):
            while "." in target and target != parent:
                target = target.rsplit(".", 1)[0]
                if target in modules and not own(name, target):
                    graph[name].add(target)
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*trail[trail.index(nxt) :], nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == []


PROTOCOLS = ("chat", "responses", "messages")


def test_the_server_has_one_package_per_protocol_and_they_share_only_what_is_beside_them() -> None:
    """Issue 53: each protocol's wire format, request parsing and routes live in
    server/<protocol>/; one protocol never imports another's (what they share, answer
    shapes, errors and limits, is in server/ beside them)."""
    for protocol in PROTOCOLS:
        home = PACKAGE / "server" / protocol
        assert (home / "wire.py").exists() and (home / "route.py").exists(), protocol
    for protocol in PROTOCOLS:
        for path in (PACKAGE / "server" / protocol).glob("*.py"):
            for name in imports(path):
                parts = name.split(".")
                if parts[:2] == ["koogcli", "server"] and len(parts) > 2:
                    assert parts[2] not in set(PROTOCOLS) - {protocol}, f"{path.name}: {name}"
    loose = [p.name for p in (PACKAGE / "server").glob("*.py") if p.stem in PROTOCOLS]
    assert loose == []


def test_one_place_composes_a_turns_request() -> None:
    """Issue 53: a turn's model request is made in services/turn/upstream_request.py (a
    compression's summary request, which is no turn, in services/summarizer.py)."""
    makers = sorted(
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if "ModelRequest(" in p.read_text() and p.name != "model_port.py"
    )
    assert makers == ["services/summarizer.py", "services/turn/upstream_request.py"]

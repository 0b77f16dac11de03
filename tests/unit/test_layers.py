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
    "openai": ("adapters/model/openai_model.py",),
    "platformdirs": ("adapters/paths.py",),
    "pydantic": ("config", "adapters"),
    "tomli_w": ("services/config_info.py",),
    "regex": ("adapters/tools/bounded_regex.py",),
    "psycopg": ("adapters/postgres",),
    "pgvector": ("adapters/postgres",),
    "starlette": ("server",),
    "uvicorn": ("cli/serve.py", "server/connections.py"),
    "markdown_it": ("ui/export.py",),
    "pygments": ("ui/export.py",),
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
            ok = target in allowed or (rel == "services/compose.py" and target == "adapters")
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

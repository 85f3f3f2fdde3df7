"""The package shows the architecture: subpackages by role, each saying what it owns; no private
name imported across modules; no import cycle among the package's modules."""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import ROOT

PKG = ROOT / "recall_shim"


def modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        if "project" in path.relative_to(PKG).parts:
            continue
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out[name] = ast.parse(path.read_text(encoding="utf-8"))
    return out


def imports(tree: ast.Module) -> list[ast.ImportFrom | ast.Import]:
    """Every import a module runs, at module level or inside a function (a lazy import that dodges
    a cycle is still a cycle); not those under ``if TYPE_CHECKING:``."""
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)}
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in skip]


def test_every_subpackage_says_what_it_owns() -> None:
    packages = [p for p in PKG.rglob("__init__.py") if "project" not in p.relative_to(PKG).parts]
    assert len(packages) >= 9
    for init in packages:
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, f"{init.relative_to(ROOT)} has no docstring saying what it owns"


def test_no_private_name_is_imported_across_modules() -> None:
    bad = []
    for name, tree in modules().items():
        for node in imports(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("recall_shim"):
                bad += [f"{name}: {node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert bad == []


def test_the_package_has_no_import_cycle() -> None:
    mods = modules()
    graph: dict[str, set[str]] = {}
    for name, tree in mods.items():
        deps = set()
        for node in imports(tree):
            targets = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom):  # `from recall_shim.x import y` may import module x.y
                targets += [f"{node.module}.{a.name}" for a in node.names]
            deps |= {t for t in targets if t in mods and t != name}
        graph[name] = deps
    # a package's __init__ importing its own modules is not a cycle through them
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(n: str, stack: list[str]) -> None:
        state[n] = 1
        for d in sorted(graph[n]):
            if n != "recall_shim" and d == "recall_shim":
                cycles.append(stack + [n, d])
            elif state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [n, d] if d in stack else [n, d])
            elif d not in state:
                visit(d, stack + [n])
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [])
    assert cycles == []

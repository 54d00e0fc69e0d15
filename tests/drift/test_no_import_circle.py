"""drift's modules import in one direction: no circle, counting imports inside functions and
under TYPE_CHECKING, and the registry's discovery of drift.stattests as an import of each test."""

from __future__ import annotations

import ast
from pathlib import Path

import drift

ROOT = Path(drift.__file__).parent


def _graph() -> dict[str, set[str]]:
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = ("drift", *path.relative_to(ROOT).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            edges[name] |= {t for t in targets if t in mods and t != name}
    edges["drift.registry"] |= {m for m in mods if m.startswith("drift.stattests.")}
    return edges


def _reaches(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in edges[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_no_module_imports_itself_back():
    edges = _graph()
    circles = sorted(m for m in edges if m in _reaches(edges, m))
    assert not circles, circles

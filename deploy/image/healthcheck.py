"""The images' HEALTHCHECK: healthy when a Vigil server in the container answers `GET /health`.

Asks the engine or proxy port (`VIGIL_PORT`) and the sidecar port (`VIGIL_SIDECAR_PORT`) on the
loopback address, with the defaults of the one settings object; exits 0 on the first 200, 1
otherwise (an engine still loading or draining answers 503). Both routes need no key.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

from vigil.config import Settings

TIMEOUT_S = 3.0


def ports() -> list[int]:
    fields = Settings.model_fields
    return [
        int(os.environ.get("VIGIL_PORT") or fields["port"].default),
        int(os.environ.get("VIGIL_SIDECAR_PORT") or fields["sidecar_port"].default),
    ]


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=TIMEOUT_S) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def main() -> int:
    return 0 if any(healthy(port) for port in ports()) else 1


if __name__ == "__main__":
    sys.exit(main())

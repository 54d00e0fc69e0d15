"""The API server count of a bench_serving run: `--api-server-count` takes numbers and `auto` (the
default, as `vigil serve` has it). `auto` is handed to the server unresolved, so it starts what
it would start for a user, and is resolved here with the server's own function on the same host
and settings, so the tables can show the count the server chose beside the setting."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

from serving.server.processes.api_server_count import resolve_api_server_count

AUTO = "auto"


def parse_counts(text: str) -> list[str]:
    """Comma-separated counts ("auto" or a positive number) as settings strings."""
    counts = []
    for part in (p.strip() for p in text.split(",")):
        if part == AUTO:
            counts.append(AUTO)
            continue
        try:
            n = int(part)
        except ValueError:
            n = 0
        if n < 1:
            raise argparse.ArgumentTypeError(f"API server count {part!r}: a number >= 1 or auto")
        counts.append(str(n))
    return counts


def resolve(setting: str, mode: str, device: str, max_num_seqs: int) -> int:
    """What `vigil serve` starts for this setting, engine process mode, device and max_num_seqs."""
    settings = SimpleNamespace(
        api_server_count=setting if setting == AUTO else int(setting),
        engine_process=mode,
        device=device,
        max_num_seqs=max_num_seqs,
    )
    return resolve_api_server_count(settings)


def label(setting: str, count: int) -> str:
    """The table's cell: the count, and `auto (N)` where the server chose it."""
    return f"{AUTO} ({count})" if setting == AUTO else str(count)


def processes_answering(base: str, tries: int = 64) -> int:
    """API processes seen answering `base` over `tries` new connections (each lands on one of
    them, by address hash): a lone API process sends no process header and counts as 1."""
    import httpx

    from bench.common.process_cpu import PID_HEADER

    seen: set[str] = set()
    for _ in range(tries):
        with httpx.Client() as client:  # a new connection each time
            value = client.get(f"{base}/health", timeout=5).headers.get(PID_HEADER)
        if value:
            seen.add(value)
    return max(1, len(seen))

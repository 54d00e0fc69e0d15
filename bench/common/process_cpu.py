"""CPU seconds a server's API processes spent, read from /proc/<pid>/stat (utime + stime).

On a shared machine wall-clock throughput moves with whatever else runs; the CPU time the API
processes themselves burn per streamed token does not, so it is the figure to compare API-path
changes by. Linux only (elsewhere every reading is None).
"""

from __future__ import annotations

import os

import httpx

PID_HEADER = "x-vigil-api-server"  # serving/server/processes/api_process.py: "<index>:<pid>"
TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of `pid` (its threads included), None if it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S  # fields 14 and 15 of proc(5)


def api_pids(server_pid: int, api_servers: int, base: str, tries: int = 64) -> list[int]:
    """The processes that answer HTTP: the server itself when it is the only API process, else
    the API processes named by their response header (each new connection lands on one of them)."""
    if api_servers <= 1:
        return [server_pid]
    seen: set[int] = set()
    for _ in range(tries):
        with httpx.Client() as client:  # a new connection each time
            value = client.get(f"{base}/health", timeout=5).headers.get(PID_HEADER)
        if value:
            seen.add(int(value.split(":")[1]))
        if len(seen) >= api_servers:
            break
    return sorted(seen)


def total_cpu_seconds(pids: list[int]) -> float | None:
    readings = [cpu_seconds(pid) for pid in pids]
    return None if not readings or any(r is None for r in readings) else sum(readings)

"""Online change detection on the per-request token statistics: CUSUM with a calibrated ARL0.

Between hourly windows a model change shows first in the token statistics of single requests.
Each sample x = (mean_logprob, mean_entropy, log(1 + completion_tokens)) is standardised by the
baseline's mean and sd, z_i = (x_i - mu_i) / sd_i, and every stream i runs two one-sided CUSUMs

    S+_i <- max(0, S+_i + z_i - k),   S-_i <- max(0, S-_i - z_i - k)

with reference value k = shift / 2 (tuned for a mean shift of `shift` sd). An alarm is raised
when any of the 2d statistics exceeds h; all statistics then restart at 0. A missing value
counts as z = 0 (no evidence either way).

Calibration of h (`calibrate`): the expected number of samples between false alarms (ARL0) is
set, not h. Under no change the rows are i.i.d. draws from the baseline, so the null is
simulated by bootstrap: N streams of T rows resampled jointly (keeping the correlation between
logprob, entropy and length) from the baseline's standardised rows. For each stream the running
maximum M_t of all 2d CUSUM paths (without restart) is kept; the first alarm at threshold h is
the first t with M_t > h, for every h at once. Run lengths are about geometric, so
ARL0(h) = (sum of min(run length, T)) / (streams that alarmed) (the censored-exponential
estimate); h is found by bisection, ARL0(h) being non-decreasing in h. T = 3 x ARL0 and
N = 400 (fewer when N x T would pass CALIBRATION_CELLS) leave ~5 % error in ARL0. The larger
error is the baseline's own: its mean and sd are estimates, and an offset e of the mean (in sd)
changes one CUSUM's drift by e, its ARL by a factor ~exp(2h e). With h ~ 11, a 5,000-row
baseline (e ~ 0.014) gives realised ARL0s within ~25 % of the target, a 20,000-row one ~6 %
(tests/drift/test_sequential.py measures both).

The CUSUM itself is vectorised: with C_t the cumulative sum of increments since the last
restart and S_0 the starting value, S_t = C_t - min(-S_0, min_{s<=t} C_s) (Lindley's recursion
unrolled), so a batch of samples costs a few numpy passes. `to_dict` / `from_dict` carry the
whole state, so a job can persist it between runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

STREAMS = ("mean_logprob", "mean_entropy", "completion_tokens")
LOG_STREAMS = frozenset({"completion_tokens"})
DEFAULT_SHIFT = 0.5
CALIBRATION_STREAMS = 400
CALIBRATION_CELLS = 12_000_000  # streams x steps of the bootstrap (memory ~ 4 bytes each)
_FIRST_CHUNK = 256


@dataclass(frozen=True)
class Alarm:
    index: int  # position in the batch given to update_many
    seen: int  # samples seen by the detector up to and including this one
    stream: str
    direction: str  # "up" | "down"
    statistic: float


def transform(values: np.ndarray, streams: tuple[str, ...] = STREAMS) -> np.ndarray:
    """(n, d) raw token statistics → the values the CUSUM standardises (log of lengths)."""
    x = np.asarray(values, dtype=np.float64).reshape(-1, len(streams)).copy()
    for i, name in enumerate(streams):
        if name in LOG_STREAMS:
            x[:, i] = np.log1p(np.maximum(x[:, i], 0.0))
    return x


def cusum_paths(increments: np.ndarray, start: np.ndarray) -> np.ndarray:
    """CUSUM statistics after each row: S_t = max(0, S_{t-1} + D_t), S_0 = `start`, per column
    (any leading axes are batch axes; time is axis -2)."""
    c = np.cumsum(increments, axis=-2)
    low = np.minimum.accumulate(np.minimum(c, -start[..., None, :]), axis=-2)
    return c - low


def _increments(z: np.ndarray, k: float) -> np.ndarray:
    return np.concatenate([z - k, -z - k], axis=-1)


@dataclass
class CusumDetector:
    center: np.ndarray
    scale: np.ndarray
    k: float
    h: float
    arl0: float
    streams: tuple[str, ...] = STREAMS
    state: np.ndarray = field(default_factory=lambda: np.empty(0))  # (2d,) S+ then S-; empty: fresh
    seen: int = 0
    alarms: int = 0
    last_alarm_seen: int | None = None

    def __post_init__(self) -> None:
        self.center = np.asarray(self.center, dtype=np.float64)
        self.scale = np.asarray(self.scale, dtype=np.float64)
        state = np.asarray(self.state, dtype=np.float64)
        self.state = state if state.size else np.zeros(2 * len(self.streams))

    def standardise(self, values: np.ndarray) -> np.ndarray:
        z = (transform(values, self.streams) - self.center) / self.scale
        return np.where(np.isfinite(z), z, 0.0)

    def update(self, x) -> Alarm | None:
        """Feed one sample (its d raw statistics); the alarm it raises, if any."""
        alarms = self.update_many(np.asarray(x, dtype=np.float64).reshape(1, -1))
        return alarms[0] if alarms else None

    def update_many(self, values: np.ndarray) -> list[Alarm]:
        """Feed samples in time order; every alarm raised, restarting after each."""
        d = self._increments_of(values)
        alarms: list[Alarm] = []
        pos, chunk = 0, _FIRST_CHUNK
        while pos < len(d):
            block = d[pos : pos + chunk]
            paths = cusum_paths(block, self.state)
            over = np.flatnonzero((paths > self.h).any(axis=1))
            if over.size == 0:
                self.state = paths[-1].copy()
                self.seen += len(block)
                pos += len(block)
                chunk *= 2
                continue
            t = int(over[0])
            col = int(np.argmax(paths[t]))
            self.seen += t + 1
            self.alarms += 1
            self.last_alarm_seen = self.seen
            n_streams = len(self.streams)
            alarms.append(
                Alarm(
                    pos + t,
                    self.seen,
                    self.streams[col % n_streams],
                    "up" if col < n_streams else "down",
                    float(paths[t, col]),
                )
            )
            self.state = np.zeros_like(self.state)
            pos += t + 1
            chunk = _FIRST_CHUNK
        return alarms

    def _increments_of(self, values: np.ndarray) -> np.ndarray:
        return _increments(self.standardise(values), self.k)

    def to_dict(self) -> dict[str, Any]:
        return {
            "center": self.center.tolist(),
            "scale": self.scale.tolist(),
            "k": self.k,
            "h": self.h,
            "arl0": self.arl0,
            "streams": list(self.streams),
            "state": self.state.tolist(),
            "seen": self.seen,
            "alarms": self.alarms,
            "last_alarm_seen": self.last_alarm_seen,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CusumDetector:
        return cls(
            np.asarray(data["center"]),
            np.asarray(data["scale"]),
            float(data["k"]),
            float(data["h"]),
            float(data["arl0"]),
            tuple(data["streams"]),
            np.asarray(data["state"]),
            int(data["seen"]),
            int(data["alarms"]),
            data.get("last_alarm_seen"),
        )


def _running_max(
    z: np.ndarray, k: float, steps: int, streams: int, rng: np.random.Generator
) -> np.ndarray:
    """(streams, steps) running max over all CUSUM paths of bootstrap streams from rows `z`."""
    out = np.empty((streams, steps), dtype=np.float32)
    state = np.zeros((streams, 2 * z.shape[1]))
    best = np.zeros(streams)
    step = max(1, 2_000_000 // (streams * z.shape[1]))
    for s in range(0, steps, step):
        n = min(step, steps - s)
        inc = _increments(z[rng.integers(len(z), size=(streams, n))], k)
        paths = cusum_paths(inc, state)
        state = paths[:, -1, :]
        m = np.maximum.accumulate(paths.max(axis=2), axis=1)
        out[:, s : s + n] = np.maximum(m, best[:, None])
        best = out[:, s + n - 1].astype(np.float64)
    return out


def estimated_arl(running_max: np.ndarray, h: float) -> float:
    """Censored-exponential ARL at threshold h from the bootstrap running maxima."""
    steps = running_max.shape[1]
    lengths = (running_max <= h).sum(axis=1) + 1  # the alarm sample counts
    alarmed = int((lengths <= steps).sum())
    return float(np.minimum(lengths, steps).sum() / max(alarmed, 1)) if alarmed else float("inf")


def calibrate(
    baseline: np.ndarray,
    *,
    arl0: float,
    rng: np.random.Generator,
    shift: float = DEFAULT_SHIFT,
    streams: tuple[str, ...] = STREAMS,
    n_streams: int = CALIBRATION_STREAMS,
) -> CusumDetector:
    """A fresh detector whose threshold gives `arl0` samples between false alarms on bootstrap
    streams from `baseline` ((n, d) raw statistics, rows i.i.d. under no change)."""
    if arl0 < 2:
        raise ValueError(f"arl0 must be at least 2, got {arl0}")
    x = transform(baseline, streams)
    x = x[np.isfinite(x).all(axis=1)]
    if len(x) < 50:
        raise ValueError(f"need at least 50 complete baseline rows to calibrate, got {len(x)}")
    center, scale = x.mean(0), x.std(0)
    scale = np.where(scale > 0, scale, 1.0)
    z = (x - center) / scale
    k = shift / 2.0
    steps = int(np.ceil(3 * arl0))
    n_streams = int(max(50, min(n_streams, CALIBRATION_CELLS // steps)))
    running_max = _running_max(z, k, steps, n_streams, rng)
    lo, hi = 0.0, float(running_max[:, -1].max())
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if estimated_arl(running_max, mid) < arl0:
            lo = mid
        else:
            hi = mid
    return CusumDetector(center, scale, k, hi, float(arl0), tuple(streams))

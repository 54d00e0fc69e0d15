"""What one ingest caller may write, decided before anything is stored.

- Tenants: a tenant key writes its own tenant only (another is a 403; none named: its own);
  a global key may not name a tenant (403): only operator and admin keys file samples for
  others.
- Timestamps: from tenant and global keys, a sample older than now minus
  `VIGIL_MAX_PAST_SKEW_S` (2 h) is refused (422), so no tenant can backdate samples into a
  future baseline's window; operator and admin keys may backfill. Later than now plus
  `VIGIL_MAX_FUTURE_SKEW_S` is refused for everyone (the record schema's rule).
- Weights: from tenant and global keys, `sample_weight` is clipped to
  [r / spread, r * spread] around the engine's own r = 1 / `VIGIL_SAMPLE_RATE`
  (spread `VIGIL_INGEST_WEIGHT_SPREAD`, 10), so one row cannot stand for a million requests.
- Eval scores: each must lie on its evaluator's scale (sidecar.evals.scales), whoever sends it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from starlette.exceptions import HTTPException

from sidecar.evals.scales import EvalScales
from vigil.config import Settings
from vigil.keys import Principal
from vigil.sample_record import SampleRecord
from vigil.sample_record.limits import MAX_SAMPLE_WEIGHT


@dataclass(frozen=True)
class IngestPolicy:
    weight_low: float
    weight_high: float
    max_past_skew_s: float
    scales: EvalScales

    @classmethod
    def from_settings(cls, settings: Settings) -> IngestPolicy:
        reference = 1.0 / settings.sample_rate if settings.sample_rate > 0 else 1.0
        spread = settings.ingest_weight_spread
        return cls(
            weight_low=reference / spread,
            weight_high=min(reference * spread, MAX_SAMPLE_WEIGHT),
            max_past_skew_s=settings.max_past_skew_s,
            scales=EvalScales.from_settings(settings),
        )

    def apply(self, samples: list[SampleRecord], principal: Principal, now: datetime) -> int:
        """Check and bound `samples` in place for `principal`; raise HTTPException (403/422) on
        the first refused one. Returns how many weights were clipped."""
        self._check_tenants(samples, principal)
        trusted = principal.may_label_others
        oldest = now - timedelta(seconds=self.max_past_skew_s)
        clipped = 0
        for index, sample in enumerate(samples):
            for name, score in sample.eval_scores.items():
                problem = self.scales.problem(name, score)
                if problem:
                    field = (
                        "eval_score"
                        if name == "default" and sample.eval_score is not None
                        else f"eval_{name}"
                    )
                    raise HTTPException(422, f"samples[{index}].{field}: {problem}")
            if trusted:
                continue
            if sample.timestamp is not None and sample.timestamp < oldest:
                raise HTTPException(
                    422,
                    (
                        f"samples[{index}].timestamp: {sample.timestamp.isoformat()} is more than "
                        f"{self.max_past_skew_s:g} s in the past (VIGIL_MAX_PAST_SKEW_S); "
                        "only operator and admin keys may backfill older samples"
                    ),
                )
            bounded = min(max(sample.sample_weight, self.weight_low), self.weight_high)
            if bounded != sample.sample_weight:
                sample.sample_weight = bounded
                clipped += 1
        return clipped

    @staticmethod
    def _check_tenants(samples: list[SampleRecord], principal: Principal) -> None:
        if principal.tenant is not None:  # a tenant-bound key writes its own tenant only
            foreign = sorted(
                {str(s.tenant) for s in samples if s.tenant not in (None, principal.tenant)}
            )
            if foreign:
                raise HTTPException(
                    403,
                    f"this key may only write tenant {principal.tenant!r}; "
                    f"the batch names {foreign[:3]}",
                )
            for sample in samples:
                sample.tenant = principal.tenant
        elif not principal.may_label_others:
            named = sorted({str(s.tenant) for s in samples if s.tenant is not None})
            if named:
                raise HTTPException(
                    403,
                    f"the batch names tenants {named[:3]}: only operator and admin keys "
                    "(VIGIL_OPERATOR_KEYS, VIGIL_ADMIN_KEYS) may file samples under a "
                    "tenant; a tenant's own key writes its tenant",
                )

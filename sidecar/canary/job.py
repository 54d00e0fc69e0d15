"""The canary job: run the fixed probes through the engine and compare them with the active canary
baseline; a change beyond the calibrated tolerance raises an `engine` alert.

- No canary baseline yet, a new probe set version, or a drift baseline activated after the
  canary baseline was fixed: this run calibrates a new one instead of comparing
  (`vigil canary baseline` does the same on demand).
- Otherwise each probe runs once; any probe outside its tolerance fires `canary_mismatch`
  (high), and a perplexity worse than `drift.detectors.canary.CRITICAL_PERPLEXITY_RATIO` times the
  recorded one fires `canary_perplexity` (critical). A clean run resolves both. The evidence names
  the model version, the engine (version, torch, device, attention backend) and the diverging
  probes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from drift.detectors.canary import Observation, Tolerance, compare, judge
from sidecar.canary.calibration import CalibrationResult, calibrate
from sidecar.canary.client import CanaryClient, EngineUnavailable
from sidecar.canary.probes import ProbeSet, load_probe_set
from storage.models import CanaryBaseline
from storage.repositories.baselines import get_active_baseline
from storage.repositories.canaries import (
    CanaryResultRow,
    activate_canary_baseline,
    add_canary_results,
    finish_canary_run,
    get_active_canary_baseline,
    start_canary_run,
)
from storage.types import to_utc
from vigil.config import Settings
from vigil.keys import internal_client_key

log = logging.getLogger("vigil.sidecar.canary")
MISMATCH_RULE, PERPLEXITY_RULE = "canary_mismatch", "canary_perplexity"


@dataclass
class CanaryOutcome:
    status: str  # skipped | calibration | ok | mismatch | engine_unavailable
    run_id: int | None = None
    baseline_id: int | None = None
    failed: list[str] = field(default_factory=list)
    critical: list[str] = field(default_factory=list)
    detail: str = ""


def _observation_dict(o: Observation) -> dict[str, Any]:
    return {
        "token_ids": list(o.token_ids),
        "logprobs": list(o.logprobs),
        "perplexity": o.perplexity,
    }


def _observation(data: dict[str, Any]) -> Observation:
    return Observation.of(data["token_ids"], data["logprobs"], data.get("perplexity"))


def _engine_key(settings: Settings) -> str | None:
    """A key that may mark its requests internal (vigil.keys.internal_client_key)."""
    return internal_client_key(settings)


def client_for(settings: Settings, probe_set: ProbeSet) -> CanaryClient:
    return CanaryClient(
        settings.engine_url, settings.model_name, api_key=_engine_key(settings), seed=probe_set.seed
    )


def needs_calibration(
    session: Session, baseline: CanaryBaseline | None, probe_set: ProbeSet
) -> str | None:
    """Why this run must fix a new canary baseline, or None."""
    if baseline is None:
        return "no canary baseline yet"
    if baseline.probe_set_version != probe_set.version:
        return f"probe set changed ({baseline.probe_set_version} -> {probe_set.version})"
    if set(baseline.expected) != {p.name for p in probe_set.probes}:
        return "probe names changed"
    drift_baseline = get_active_baseline(session)
    if (
        drift_baseline is not None
        and drift_baseline.activated_at is not None
        and to_utc(drift_baseline.activated_at) > to_utc(baseline.created_at)
    ):
        return f"drift baseline {drift_baseline.id} activated after the canary baseline"
    return None


def store_calibration(
    session: Session,
    result: CalibrationResult,
    probe_set: ProbeSet,
    identity: dict[str, Any],
    settings: Settings,
    now: datetime,
    reason: str,
) -> tuple[CanaryBaseline, int]:
    baseline = activate_canary_baseline(
        session, probe_set_version=probe_set.version, model_version=settings.model_version,
        engine=identity, expected={n: _observation_dict(o) for n, o in result.expected.items()},
        tolerances={n: t.to_dict() for n, t in result.tolerances.items()},
        calibration={"reason": reason, "noise": result.noise}, now=now,
    )  # fmt: skip
    run = start_canary_run(
        session,
        baseline_id=baseline.id,
        model_version=settings.model_version,
        engine=identity,
        now=now,
    )
    add_canary_results(session, run.id, [
        CanaryResultRow(n, list(o.token_ids), o.token_hash, list(o.logprobs), o.perplexity)
        for n, o in result.expected.items()
    ])  # fmt: skip
    finish_canary_run(session, run, status="calibration", summary={"reason": reason}, now=now)
    return baseline, run.id


def calibrate_now(
    settings: Settings,
    session_factory: sessionmaker[Session],
    now: datetime,
    reason: str = "requested",
) -> CanaryOutcome:
    """Fix a new canary baseline from calibration runs (what `vigil canary baseline` runs)."""
    probe_set = load_probe_set(settings.canary_probes_path)
    with client_for(settings, probe_set) as client:
        identity = client.engine_identity()
        result = calibrate(client.run, client.filler, probe_set)
    with session_factory() as session:
        baseline, run_id = store_calibration(
            session, result, probe_set, identity, settings, now, reason
        )
        session.commit()
        return CanaryOutcome("calibration", run_id=run_id, baseline_id=baseline.id, detail=reason)


def run_canary_job(
    settings: Settings,
    session_factory: sessionmaker[Session],
    now: datetime,
    *,
    force_compare: bool = False,
) -> CanaryOutcome:
    """The scheduled job (and `vigil canary run`, which passes `force_compare`: it never
    calibrates, it compares or says why it cannot)."""
    if not settings.canary_enabled and not force_compare:
        return CanaryOutcome("skipped", detail="VIGIL_CANARY_ENABLED is false")
    probe_set = load_probe_set(settings.canary_probes_path)
    with session_factory() as session:
        baseline = get_active_canary_baseline(session)
        reason = needs_calibration(session, baseline, probe_set)
    if reason is not None:
        if force_compare:
            return CanaryOutcome("skipped", detail=f"nothing to compare with: {reason}")
        log.info("canary: calibrating a new baseline (%s)", reason)
        try:
            return calibrate_now(settings, session_factory, now, reason)
        except EngineUnavailable as exc:
            return CanaryOutcome("engine_unavailable", detail=str(exc))
    assert baseline is not None
    try:
        with client_for(settings, probe_set) as client:
            identity = client.engine_identity()
            observed = {p.name: client.run(p) for p in probe_set.probes}
    except EngineUnavailable as exc:
        log.warning("canary: engine unavailable, retried next interval: %s", exc)
        return CanaryOutcome("engine_unavailable", baseline_id=baseline.id, detail=str(exc))
    return record_comparison(settings, session_factory, now, baseline.id, identity, observed)


def record_comparison(
    settings: Settings,
    session_factory: sessionmaker[Session],
    now: datetime,
    baseline_id: int,
    identity: dict[str, Any],
    observed: dict[str, Observation],
) -> CanaryOutcome:
    from alerts.service import raise_condition

    with session_factory() as session:
        baseline = session.get(CanaryBaseline, baseline_id)
        if baseline is None:  # the caller read it a moment ago; retention keeps active ones
            raise LookupError(f"canary baseline {baseline_id} does not exist")
        rows, failed, critical, findings = [], [], [], {}
        for name, obs in observed.items():
            comparison = compare(_observation(baseline.expected[name]), obs)
            verdict = judge(comparison, Tolerance.from_dict(baseline.tolerances[name]))
            detail = {**comparison.to_dict(), "reasons": list(verdict.reasons)}
            rows.append(
                CanaryResultRow(
                    name,
                    list(obs.token_ids),
                    obs.token_hash,
                    list(obs.logprobs),
                    obs.perplexity,
                    detail,
                    verdict.ok,
                )
            )
            if not verdict.ok:
                failed.append(name)
                findings[name] = detail
            if verdict.critical:
                critical.append(name)
        status = "mismatch" if failed else "ok"
        run = start_canary_run(
            session,
            baseline_id=baseline.id,
            model_version=settings.model_version,
            engine=identity,
            now=now,
        )
        add_canary_results(session, run.id, rows)
        finish_canary_run(
            session, run, status=status, summary={"failed": failed, "critical": critical}, now=now
        )
        evidence = {
            "canary_run_id": run.id, "canary_baseline_id": baseline.id,
            "model_version": settings.model_version,
            "baseline_model_version": baseline.model_version,
            "engine": identity, "baseline_engine": baseline.engine,
            "diverging_probes": findings, "probe_set_version": baseline.probe_set_version,
        }  # fmt: skip
        first = failed[0] if failed else None
        raise_condition(
            session,
            MISMATCH_RULE,
            evidence=evidence,
            healthy=not failed,
            now=now,
            settings=settings,
            summary=f"engine canary {first} diverged from its baseline "
            f"({len(failed)} of {len(observed)} probes)"
            if failed
            else None,
        )
        raise_condition(
            session,
            PERPLEXITY_RULE,
            evidence=evidence,
            healthy=not critical,
            now=now,
            settings=settings,
            summary=f"engine perplexity degraded on canary {critical[0]}" if critical else None,
        )
        session.commit()
        return CanaryOutcome(
            status, run_id=run.id, baseline_id=baseline.id, failed=failed, critical=critical
        )

"""The sidecar's FastAPI app: `/health`, the ingest API, reports and alert drill-down pages.

Each concern is a router built in its own module: health (sidecar.health), ingest
(sidecar.ingest.routes, sidecar.otlp.receiver), sign-in (sidecar.page_auth), pages and
dashboards (dashboards), metrics (sidecar.metrics). Error answers: sidecar.http_errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Depends, FastAPI
from sqlalchemy.orm import Session, sessionmaker

from sidecar.health import build_health_router
from sidecar.http_errors import install_error_handlers
from sidecar.ingest.routes import INGEST_PATH, build_ingest_router, require_api_key
from sidecar.ingest.write_path import IngestPath
from sidecar.limits import RequestGuard, body_limit
from sidecar.otlp.logs_receiver import LOGS_PATH, build_logs_router
from sidecar.otlp.receiver import TRACES_PATH, build_otlp_router
from sidecar.otlp.tally import OtlpTally, health_status
from sidecar.page_auth import PageAuth
from sidecar.same_origin import SameOriginActions
from sidecar.slack_actions import build_slack_router
from vigil.auth_throttle import AuthThrottle, throttle_from_settings
from vigil.config import Settings
from vigil.keys import KeyRing
from vigil.security_headers import SecurityHeaders, docs_urls


def create_app(
    settings: Settings,
    session_factory: sessionmaker[Session],
    *,
    status: Callable[[], dict[str, Any]] = lambda: {},
) -> FastAPI:
    """The app; `status()` adds the scheduler/leader state to `/health`."""
    app = FastAPI(title="Vigil sidecar", version="0.1.0", **docs_urls(settings))
    app.state.settings = settings
    app.state.session_factory = session_factory
    keyring = KeyRing.from_settings(settings)
    throttle = throttle_from_settings(settings)  # key checks of the API and the login form alike
    _add_middleware(app, settings, keyring, throttle)
    install_error_handlers(app, settings)
    write_path = IngestPath.from_settings(settings, session_factory)
    app.state.otlp_tally = tally = OtlpTally()
    app.include_router(
        build_health_router(session_factory, lambda: {**status(), **health_status(tally)})
    )
    app.include_router(build_ingest_router(settings, write_path))
    app.include_router(build_otlp_router(write_path, require_api_key, tally))
    app.include_router(build_logs_router(write_path, require_api_key, tally))
    app.include_router(build_slack_router(settings, session_factory))  # signed by Slack
    _include_pages(
        app, settings, session_factory, PageAuth(settings, keyring, throttle, session_factory)
    )
    return app


def _add_middleware(
    app: FastAPI, settings: Settings, keyring: KeyRing, throttle: AuthThrottle | None
) -> None:
    """The last added runs first: security headers, the same-origin check, then the guard."""
    # the key is checked before the body is read, and every body is bounded while it streams
    app.add_middleware(
        RequestGuard,
        keyring=keyring,
        protected=("/v1/",),
        max_bytes=body_limit((INGEST_PATH, TRACES_PATH, LOGS_PATH), settings.ingest_max_bytes),
        body_timeout_s=settings.body_timeout_s,
        throttle=throttle,
        trusted_proxies=tuple(settings.trusted_proxies),
    )
    app.add_middleware(SameOriginActions, public_url=settings.public_url)  # before the key check
    app.add_middleware(SecurityHeaders)


def _include_pages(
    app: FastAPI, settings: Settings, session_factory: sessionmaker[Session], pages: PageAuth
) -> None:
    """Sign-in, the report and drill-down pages, dashboards and `/metrics`, behind a viewer."""
    from dashboards.pages import build_router
    from dashboards.routes import build_dashboard_router
    from sidecar.baseline_ops import baseline_ops
    from sidecar.canary.metrics import CanaryCollector
    from sidecar.metrics import build_registry, metrics_router
    from sidecar.otlp.tally import OtlpCollector

    app.include_router(pages.router())
    app.include_router(
        build_router(settings, session_factory), dependencies=[Depends(pages.require_viewer)]
    )
    app.state.metrics_registry = build_registry(settings, session_factory)
    app.state.metrics_registry.register(CanaryCollector(session_factory))
    app.state.metrics_registry.register(OtlpCollector(app.state.otlp_tally))
    app.include_router(
        metrics_router(app.state.metrics_registry), dependencies=[Depends(pages.require_viewer)]
    )
    app.include_router(
        build_dashboard_router(
            settings, session_factory, pages.require_viewer, baseline_ops(settings, session_factory)
        )
    )

"""What the rendered layouts say, read against Vigil itself: every variable a Vigil container
gets is a real setting and its value passes the settings' validation; probes point at routes
the process serves; pods outlast the drain; Services and ServiceMonitors reach named ports;
every Vigil container is bounded and unprivileged; the sidecar's port is reachable only by the
peers the layout names; the PrometheusRule is the rules file."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from deploy_render import (
    DEPLOY,
    OVERLAYS,
    env_value,
    named,
    pod_spec,
    render,
    vigil_containers,
)
from fastapi import FastAPI

from vigil.config import ConfigError, Settings, load_settings
from vigil.devtools.prometheus_rule import render as render_prometheus_rule

SETTINGS = set(Settings.model_fields)


def _setting(variable: str) -> str:
    assert variable.startswith("VIGIL_"), f"{variable} is not a Vigil setting"
    name = variable.removeprefix("VIGIL_").lower()
    assert name in SETTINGS, f"{variable} is not a Vigil setting"
    return name


def _plain_env(overlay: str) -> list[tuple[str, str, str | None]]:
    """(container, variable, value or None when it comes from a Secret) for Vigil containers,
    ConfigMaps and Secrets they load included."""
    objects = render(overlay)
    out = []
    for _, container in vigil_containers(objects):
        for item in container.get("env", []):
            out.append((container["name"], item["name"], item.get("value")))
        for source in container.get("envFrom", []):
            kind, ref = next(iter(source.items()))
            obj = named(objects, "ConfigMap" if kind == "configMapRef" else "Secret", ref["name"])
            for key, value in (obj.get("data") or obj.get("stringData") or {}).items():
                out.append((container["name"], key, value))
    return out


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_variable_is_a_setting_and_its_value_loads(overlay):
    """Each container's whole environment, placeholders filled in, loads as settings."""
    by_container: dict[str, dict[str, object]] = {}
    for container, variable, value in _plain_env(overlay):
        name = _setting(variable)
        if value is None:  # from a Secret the layout does not hold (the database URL)
            continue
        filled = value.replace("CHANGE-ME", "f1ll3d-w1th-a-r3al-s3cr3t")
        by_container.setdefault(container, {})[name] = (
            json.loads(filled) if filled[:1] in "[{" else filled
        )
    assert by_container
    for values in by_container.values():
        settings = load_settings(**values)
        assert settings.env == "production"


def test_the_base_secret_placeholders_do_not_start():
    objects = render("overlays/engine")
    values = {
        _setting(k): json.loads(v) if v[:1] in "[{" else v
        for k, v in named(objects, "Secret", "vigil")["stringData"].items()
    }
    with pytest.raises(ConfigError, match="placeholder"):
        load_settings(env="production", **values)


def test_a_misspelt_variable_is_caught():
    with pytest.raises(AssertionError, match="VIGIL_DRAIN_GRACE is not a Vigil setting"):
        _setting("VIGIL_DRAIN_GRACE")


def _engine_paths() -> set[str]:
    from serving.server.api.routes import add_routes

    app = FastAPI()
    add_routes(app)
    return {route.path for route in app.routes}


async def _get_health(app) -> int:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://vigil") as client:
        return (await client.get("/health")).status_code


def _sidecar_health_status(tmp_path) -> int:
    from sidecar.app import create_app
    from storage.db import session_factory

    settings = load_settings(database_url=f"sqlite:///{tmp_path / 'v.db'}")
    return asyncio.run(_get_health(create_app(settings, session_factory(settings.database_url))))


def _proxy_health_status() -> int:
    from serving.proxy.main import build_proxy

    settings = load_settings(proxy_upstream_url="http://127.0.0.1:9")
    return asyncio.run(_get_health(build_proxy(settings, log_traffic=False)))


def test_probes_point_at_routes_the_processes_serve(tmp_path):
    """The engine's routes as it registers them; the sidecar's and the proxy's /health asked
    over ASGI (200 from each)."""
    assert _sidecar_health_status(tmp_path) == 200
    assert _proxy_health_status() == 200
    served = {"serve": _engine_paths(), "sidecar": {"/health"}, "proxy": {"/health"}}
    checked = 0
    for overlay in OVERLAYS:
        for _, container in vigil_containers(render(overlay)):
            ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                probe = container.get(kind)
                if probe is None:
                    continue
                get = probe.get("httpGet") or {}
                port = get.get("port") or probe["tcpSocket"]["port"]
                assert port in ports, f"{container['name']} {kind}: no port {port}"
                if get:
                    assert get["path"] in served[container["args"][0]], (container["name"], kind)
                    checked += 1
    assert checked >= 8


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_outlast_the_drain_and_are_bounded_and_unprivileged(overlay):
    objects = render(overlay)
    workloads = {id(w): w for w, _ in vigil_containers(objects)}
    for workload in workloads.values():
        spec = pod_spec(workload)
        assert spec is not None
        drains = [c for c in spec["containers"] if c.get("args", [""])[0] in ("serve", "proxy")]
        for container in drains:
            grace = float(env_value(container, "VIGIL_DRAIN_GRACE_S", objects) or 0)
            assert grace > 0, f"{container['name']} sets no drain grace"
            assert spec["terminationGracePeriodSeconds"] > grace
    for workload, container in vigil_containers(objects):
        resources = container["resources"]
        assert {"cpu", "memory"} <= set(resources["requests"]), container["name"]
        assert "memory" in resources["limits"], container["name"]
        pod_security = pod_spec(workload).get("securityContext", {})
        security = {**pod_security, **container.get("securityContext", {})}
        assert security["runAsNonRoot"] is True and security["runAsUser"] != 0
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_services_and_monitors_reach_named_ports(overlay):
    objects = render(overlay)
    pods = [
        (obj["spec"]["template"]["metadata"]["labels"], pod_spec(obj))
        for obj in objects
        if obj["kind"] == "Deployment"
    ]
    for service in [o for o in objects if o["kind"] == "Service"]:
        selector = service["spec"]["selector"]
        matched = [s for labels, s in pods if selector.items() <= labels.items()]
        assert matched, f"Service {service['metadata']['name']} selects no pod"
        names = {p["name"] for s in matched for c in s["containers"] for p in c.get("ports", [])}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in names, (service["metadata"]["name"], port)
    for monitor in [o for o in objects if o["kind"] == "ServiceMonitor"]:
        wanted = monitor["spec"]["selector"]["matchLabels"]
        services = [
            s
            for s in objects
            if s["kind"] == "Service" and wanted.items() <= s["metadata"]["labels"].items()
        ]
        assert len(services) == 1, monitor["metadata"]["name"]
        ports = {p["name"] for p in services[0]["spec"]["ports"]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports


def test_the_engine_gets_a_gpu_and_the_sidecar_two_replicas_and_a_budget():
    objects = render("overlays/engine")
    engine = named(objects, "Deployment", "vigil-engine")
    (container,) = pod_spec(engine)["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert env_value(container, "VIGIL_DEVICE", objects) == "cuda"
    sidecar = named(objects, "Deployment", "vigil-sidecar")
    assert sidecar["spec"]["replicas"] == 2
    budget = named(objects, "PodDisruptionBudget", "vigil-sidecar")
    pod_labels = sidecar["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert budget["spec"]["minAvailable"] == 1


def _admits(policy: dict, peer_labels: dict, namespace: str, same_namespace: bool) -> bool:
    for rule in policy["spec"].get("ingress", []):
        for peer in rule["from"]:
            pods = peer.get("podSelector", {}).get("matchLabels")
            spaces = peer.get("namespaceSelector")
            if spaces is None and not same_namespace:
                continue
            if spaces is not None and spaces.get("matchLabels") not in (
                None,
                {"kubernetes.io/metadata.name": namespace},
            ):
                continue
            if pods is None or pods.items() <= peer_labels.items():
                return True
    return False


def test_the_sidecar_port_is_open_to_its_peers_and_closed_to_others():
    objects = render("overlays/engine")
    policy = named(objects, "NetworkPolicy", "vigil-sidecar-ingress")
    engine_labels = named(objects, "Deployment", "vigil-engine")["spec"]["template"]["metadata"][
        "labels"
    ]
    assert _admits(policy, engine_labels, "vigil", same_namespace=True)
    assert _admits(policy, {"vigil-client": "true"}, "apps", same_namespace=False)
    assert _admits(policy, {}, "ingress-nginx", same_namespace=False)  # the pages
    assert not _admits(policy, {"app": "anything"}, "apps", same_namespace=False)
    assert not _admits(policy, {"app": "anything"}, "vigil", same_namespace=True)
    ingress = named(objects, "Ingress", "vigil-pages")
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == "vigil-sidecar"


def test_beside_vllm_the_proxy_fronts_vllm_and_the_spans_reach_the_sidecar():
    proxied = render("beside-vllm/proxy")
    vllm = named(proxied, "Deployment", "vllm")
    containers = {c["name"]: c for c in pod_spec(vllm)["containers"]}
    assert set(containers) == {"vllm", "vigil-proxy"}
    upstream = env_value(containers["vigil-proxy"], "VIGIL_PROXY_UPSTREAM_URL", proxied)
    vllm_port = containers["vllm"]["ports"][0]["containerPort"]
    assert upstream == f"http://127.0.0.1:{vllm_port}"
    (port,) = named(proxied, "Service", "vllm")["spec"]["ports"]
    assert port["targetPort"] == "vigil-proxy"
    assert named(proxied, "ConfigMap", "vigil-config")["data"]["VIGIL_CANARY_ENABLED"] == "false"

    traced = render("beside-vllm/otlp")
    (vllm_container,) = pod_spec(named(traced, "Deployment", "vllm"))["containers"]
    endpoint = "--otlp-traces-endpoint=http://vigil-sidecar:8001/v1/traces"
    assert endpoint in vllm_container["args"]
    env = {e["name"]: e for e in vllm_container["env"]}
    assert env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]["value"] == "http/protobuf"
    assert "OTEL_EXPORTER_OTLP_TRACES_HEADERS" in env


def test_the_prometheus_rule_is_the_rules_file():
    committed = (DEPLOY / "prometheus" / "prometheusrule.yaml").read_text()
    assert committed == render_prometheus_rule((DEPLOY / "prometheus" / "rules.yaml").read_text())

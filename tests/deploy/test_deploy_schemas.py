"""Every overlay under deploy/ renders (`kubectl kustomize`, no cluster), and every object it
renders passes a strict schema: Kubernetes 1.37's own kinds through `kubernetes-validate
--strict` (unknown fields rejected); the Prometheus Operator's kinds through the operator's
generated models (cloudcoil), made strict by a round trip that must keep every field; the
CloudNativePG Cluster through a strict schema of the fields the layout uses, their types taken
from the operator's CRD (postgresql.cnpg.io/v1)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils
import pytest
from cloudcoil.models.prometheus_operator.v1 import PrometheusRule, ServiceMonitor
from deploy_render import OVERLAYS, render

K8S_VERSION = "1.37"
OPERATOR_MODELS = {"ServiceMonitor": ServiceMonitor, "PrometheusRule": PrometheusRule}

# What each overlay renders: kind -> names. The closing list of objects per layout.
BASE = {
    "Secret": {"vigil", "vigil-metrics-scrape"},
    "ConfigMap": {"vigil-config", "vigil-grafana-dashboard"},
    "Job": {"vigil-migrate"},
    "Deployment": {"vigil-sidecar"},
    "Service": {"vigil-sidecar"},
    "PodDisruptionBudget": {"vigil-sidecar"},
    "PersistentVolumeClaim": {"vigil-reports"},
    "Ingress": {"vigil-pages"},
    "NetworkPolicy": {"vigil-default-deny-ingress", "vigil-sidecar-ingress"},
    "ServiceMonitor": {"vigil-engine", "vigil-sidecar"},
    "PrometheusRule": {"vigil"},
}


def _with(extra: dict[str, set[str]]) -> dict[str, set[str]]:
    out = {kind: set(names) for kind, names in BASE.items()}
    for kind, names in extra.items():
        out.setdefault(kind, set()).update(names)
    return out


ENGINE = {
    "Deployment": {"vigil-engine"},
    "Service": {"vigil-engine"},
    "NetworkPolicy": {"vigil-engine-ingress"},
}
VLLM = {"Deployment": {"vllm"}, "Service": {"vllm"}, "Secret": {"vigil-database"}}
EXPECTED = {
    "overlays/engine": _with({**ENGINE, "Secret": {"vigil-database"}}),
    "overlays/engine-cloudnative-pg": _with({**ENGINE, "Cluster": {"vigil-db"}}),
    "beside-vllm/proxy": _with(VLLM),
    "beside-vllm/otlp": _with({**VLLM, "Secret": {"vigil-database", "vigil-otlp-headers"}}),
}

_QUANTITY = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
_RESOURCES = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "requests": {"type": "object", "additionalProperties": _QUANTITY},
        "limits": {"type": "object", "additionalProperties": _QUANTITY},
    },
}
CNPG_CLUSTER = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "postgresql.cnpg.io/v1"},
        "kind": {"const": "Cluster"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["instances", "storage"],
            "properties": {
                "instances": {"type": "integer", "minimum": 1},
                "primaryUpdateStrategy": {"enum": ["unsupervised", "supervised"]},
                "bootstrap": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "initdb": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "database": {"type": "string"},
                                "owner": {"type": "string"},
                            },
                        }
                    },
                },
                "storage": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"size": {"type": "string"}, "storageClass": {"type": "string"}},
                },
                "resources": _RESOURCES,
            },
        },
    },
}


@pytest.fixture(scope="module", autouse=True)
def _schema_files_read_once() -> Iterator[None]:
    """kubernetes-validate reads its schema files again for every object; read each once."""
    with pytest.MonkeyPatch.context() as patch:
        read = functools.cache(kubernetes_validate.utils.schema_contents)
        patch.setattr(kubernetes_validate.utils, "schema_contents", read)
        yield


def _strict_operator_object(obj: dict[str, Any]) -> None:
    model = OPERATOR_MODELS[obj["kind"]].model_validate(obj)
    kept = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
    assert kept == obj, f"{obj['kind']}/{obj['metadata']['name']}: a field the model does not know"


def validate(obj: dict[str, Any]) -> None:
    if obj["kind"] in OPERATOR_MODELS:
        _strict_operator_object(obj)
    elif obj["apiVersion"] == "postgresql.cnpg.io/v1":
        jsonschema.validate(obj, CNPG_CLUSTER)
    else:  # a built-in kind: its schema must exist (SchemaNotFoundError fails the test)
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_passes_its_strict_schema(overlay):
    objects = render(overlay)
    for obj in objects:
        validate(obj)
    found: dict[str, set[str]] = {}
    for obj in objects:
        found.setdefault(obj["kind"], set()).add(obj["metadata"]["name"])
    assert found == EXPECTED[overlay]


def test_the_single_pod_manifest_passes_too():
    import yaml
    from deploy_render import DEPLOY

    for obj in yaml.safe_load_all((DEPLOY / "vigil.yaml").read_text()):
        validate(obj)


@pytest.mark.parametrize(
    ("kind", "bad"),
    [
        ("Deployment", {"spec": {"replicas": "two"}}),  # a wrong type
        ("Deployment", {"spec": {"template": {"spec": {"containerz": []}}}}),  # an unknown field
        ("ServiceMonitor", {"spec": {"endpoints": [{"port": "http", "pathh": "/metrics"}]}}),
        ("Cluster", {"spec": {"instances": 0}}),
        ("Cluster", {"spec": {"storage": {"size": "1Gi", "sise": "2Gi"}}}),
    ],
)
def test_the_checks_reject_a_broken_object(kind, bad):
    """The validators above are not vacuous: one wrong field in a rendered object fails them."""
    overlay = "overlays/engine-cloudnative-pg"
    (obj,) = [o for o in render(overlay) if o["kind"] == kind][:1]
    broken = _merge(obj, bad)
    with pytest.raises((AssertionError, jsonschema.ValidationError, ValueError)):
        validate(broken)


def _merge(base: Any, change: Any) -> Any:
    if isinstance(base, dict) and isinstance(change, dict):
        out = dict(base)
        for key, value in change.items():
            out[key] = _merge(base.get(key), value) if key in base else value
        return out
    if isinstance(base, list) and isinstance(change, list) and base and change:
        return [_merge(base[0], change[0]), *base[1:]]
    return change

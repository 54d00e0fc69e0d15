"""Vigil alerts: rules → deduped, tiered alerts → signed webhooks through a persistent outbox.

The sidecar calls:
    raise_alerts(session, proposed, run_id=, now=, settings=)   # in the drift job's transaction
    raise_condition(session, rule_id, segment, evidence, healthy=, now=, settings=)  # monitors
    DeliveryWorker(session_factory, settings=).start() / .stop()  # sends the outbox
    list_alerts / get_alert / deliveries_for_alert / resolve_alert   # pages and API
    list_dead_letters / retry_dead / outbox_counts                  # dead-letter view
"""

from alerts.delivery import (
    DeliveryStats,
    deliver_due,
    list_dead_letters,
    outbox_counts,
    retry_dead,
)
from alerts.payloads import alert_document, alert_url, build_payload, encode_body, report_url
from alerts.proposal import KINDS, SEVERITIES, Proposal, ProposalError, coerce_proposal
from alerts.rules_file import RulesError, RuleSet, Target, load_rules, parse_rules
from alerts.service import (
    count_open_alerts,
    deliveries_for_alert,
    get_alert,
    list_alerts,
    raise_alerts,
    raise_condition,
    resolve_alert,
)
from alerts.signing import SignatureError, sign, signed_headers, verify
from alerts.worker import DeliveryWorker

__all__ = [
    "KINDS",
    "SEVERITIES",
    "DeliveryStats",
    "DeliveryWorker",
    "Proposal",
    "ProposalError",
    "RuleSet",
    "RulesError",
    "SignatureError",
    "Target",
    "alert_document",
    "alert_url",
    "build_payload",
    "coerce_proposal",
    "count_open_alerts",
    "deliver_due",
    "deliveries_for_alert",
    "encode_body",
    "get_alert",
    "list_alerts",
    "list_dead_letters",
    "load_rules",
    "outbox_counts",
    "parse_rules",
    "raise_alerts",
    "raise_condition",
    "report_url",
    "resolve_alert",
    "retry_dead",
    "sign",
    "signed_headers",
    "verify",
]

"""The alerting rules and the Grafana dashboard of ``config/prometheus`` (the chart's PrometheusRule and
dashboard ConfigMap) against the real promtool that ``localcluster/build.sh`` builds (PROMETHEUS_VERSION).

``promtool check rules`` reads the rules (and the chart's rendering of them, thresholds changed);
``promtool test rules`` runs ``rules_test.yaml``, where every alert fires and stays quiet on series shaped
as the operator exports them. Every dashboard query, its Grafana variables substituted, is valid PromQL
(checked as a recording rule) and reads only metrics the operator exports (:func:`trainer.main.operator_metrics`).
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster.binaries import ensure
from tests.tooling.test_helm_chart import helm_template, one
from trainer.main import operator_metrics

pytestmark = pytest.mark.builds("helm", "prometheus")

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "config" / "prometheus"
RULES, RULES_TEST, DASHBOARD = PROMETHEUS / "rules.yaml", PROMETHEUS / "rules_test.yaml", PROMETHEUS / "dashboard.json"
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$trainjob_namespace": ".*", "$trainjob": ".*", "$metric": ".*"}
"""What Grafana substitutes in the panels' queries: its rate interval, and "All" (``.*``) for each variable."""


@functools.cache
def promtool() -> str:
    return str(ensure("promtool")["promtool"])


def promtool_run(*args: str, cwd: Path = PROMETHEUS) -> str:
    proc = subprocess.run([promtool(), *args], capture_output=True, text=True, check=False, cwd=cwd)
    assert proc.returncode == 0, f"promtool {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    return proc.stdout


def alerts(groups: list[dict[str, Any]]) -> list[str]:
    return [rule["alert"] for group in groups for rule in group["rules"]]


def panel_queries(dashboard: dict[str, Any]) -> list[str]:
    """Every target's ``expr`` of every panel, Grafana's variables substituted (:data:`GRAFANA_VARIABLES`)."""
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable, value in GRAFANA_VARIABLES.items():
        exprs = [e.replace(variable, value) for e in exprs]
    return exprs


def test_promtool_checks_the_rules() -> None:
    out = promtool_run("check", "rules", str(RULES))
    assert f"SUCCESS: {len(alerts(yaml.safe_load(RULES.read_text())['groups']))} rules found" in out, out


def test_promtool_unit_tests_fire_and_keep_quiet_every_alert() -> None:
    """Each alert of rules.yaml has a firing and a quiet case in rules_test.yaml, and they pass."""
    tests = yaml.safe_load(RULES_TEST.read_text())["tests"]
    cases = [case for test in tests for case in test["alert_rule_test"]]
    firing = {c["alertname"] for c in cases if c["exp_alerts"]}
    quiet = {c["alertname"] for c in cases if not c["exp_alerts"]}
    every = set(alerts(yaml.safe_load(RULES.read_text())["groups"]))
    assert firing == quiet == every
    assert "SUCCESS" in promtool_run("test", "rules", RULES_TEST.name)


def test_the_charts_prometheus_rule_with_other_thresholds_passes_promtool(tmp_path: Path) -> None:
    rule = one(
        helm_template("prometheusRule.enabled=true", "prometheusRule.jobsStuckCreatedFor=1h30m"), "PrometheusRule"
    )
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    assert "SUCCESS" in promtool_run("check", "rules", str(path))


def test_every_dashboard_query_is_promql_over_metrics_the_operator_exports(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = panel_queries(dashboard)
    assert len(exprs) >= 15 and all("$" not in e for e in exprs), exprs
    records = [{"record": f"dashboard:panel_{i}", "expr": e} for i, e in enumerate(exprs)]
    path = tmp_path / "dashboard_rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))
    assert f"SUCCESS: {len(exprs)} rules found" in promtool_run("check", "rules", str(path))

    exported = {"up"}  # Prometheus' own, per target
    for family in operator_metrics().registry.collect():
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}.get(family.type, ("",))
        exported |= {family.name + suffix for suffix in suffixes}
    used = {name for e in exprs for name in re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", e)}
    assert used and used <= exported, used - exported
    assert {
        "kubeflow_trainer_jobs",
        "kubeflow_trainer_trainjob_progress_ratio",
        "kubeflow_trainer_trainjob_metric",
    } <= used

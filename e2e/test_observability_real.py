"""The operator's metrics as a real Prometheus sees them, for a real training run.

A real Prometheus (``localcluster/build.sh prometheus``: PROMETHEUS_VERSION) scrapes the operator's
``/metrics`` every second as job ``trainer-operator``, keeping the series' own labels (what the chart's
ServiceMonitor does), and evaluates the chart's PrometheusRule (``config/prometheus/rules.yaml`` as
``helm template`` renders it). The operator leads a Lease, serves the admission webhook and the status
server (where pods on real nodes reach the host). The digits sample (``config/samples/digits``) trains on
two real nodes (kubelet + containerd), rank 0 posting progress, loss and accuracy, and completes. Then,
by PromQL over Prometheus' HTTP API:

- ``kubeflow_trainer_jobs`` counts as many Complete TrainJobs as the apiserver lists; the admission wait,
  startup and run histograms observed this job once each (run: ``succeeded``);
- the training series of the job: progress reached 1.0, accuracy above 0.85 and a loss, read with
  ``max_over_time`` (the series end with the job, and are gone once it is Complete);
- every query of every panel of the chart's Grafana dashboard (Grafana's variables substituted) returns
  series over the run;
- the rule groups loaded, every rule evaluated without error, none firing.

Runs where real nodes can (:func:`localcluster.realnode.node.unavailable`), else is skipped with its
reason; ``TRAINER_E2E_REAL=0`` skips it. One TrainJob, one real-node run."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from e2e.helpers import ROOT, trainer_dashboard, trainjob_ended
from localcluster import ExternalCluster, LocalCluster
from localcluster.binaries import ensure
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import reserved_ports
from localcluster.operator_sa import NAMESPACE
from localcluster.process import Component
from localcluster.realnode.node import NODE_SELECTOR, RealNodes, status_server_args, unavailable
from trainer.api.kinds import TRAINJOBS
from trainer.framework.json_codec import JSON

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable()
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(WHY_NOT is not None, reason=f"real pods: {WHY_NOT}"),
    pytest.mark.builds("helm", "prometheus"),
]
DIGITS = ROOT / "config" / "samples" / "digits"
CHART = ROOT / "charts" / "trainer"
JOB = "trainer-operator"
"""The scrape job, as the chart's ServiceMonitor names it (the alerts select it)."""
STATUS, METRICS, WEBHOOK, PROMETHEUS, DASHBOARD = reserved_ports(5)  # bound minutes after import, in the whole suite
# Under TRAINER_E2E_OPERATOR_SA the module's operator may only hold Leases in its own namespace.
LEASE_NS = NAMESPACE if os.environ.get("TRAINER_E2E_OPERATOR_SA") else "default"
OPERATOR_ARGS = [
    *status_server_args(STATUS),
    f"--metrics-bind-address=127.0.0.1:{METRICS}",
    *("--webhook-port", str(WEBHOOK), "--webhook-host", "127.0.0.1"),
    *("--leader-elect", f"--leader-election-namespace={LEASE_NS}", "--leader-election-id=e2e-observability"),
]
RATE_INTERVAL = "1m"
"""Grafana's ``$__rate_interval`` in the panels' queries."""


def chart_monitoring() -> tuple[list[JSON], JSON]:
    """The chart's PrometheusRule groups and Grafana dashboard, as ``helm template`` renders them."""
    values = "prometheusRule.enabled=true,grafanaDashboard.enabled=true"
    out = subprocess.run(
        [str(ensure("helm")["helm"]), "template", "trainer", str(CHART), "-n", "trainer-system", "--set", values],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    (dashboard,) = [d for d in docs if d["kind"] == "ConfigMap" and "trainer.json" in d.get("data", {})]
    return rule["spec"]["groups"], json.loads(dashboard["data"]["trainer.json"])


def panel_queries(dashboard: JSON) -> dict[str, str]:
    """``<panel title> <refId>`` -> its query, Grafana's variables as "All" (``.*``)."""
    values = {"$__rate_interval": RATE_INTERVAL, "$trainjob_namespace": ".*", "$trainjob": ".*", "$metric": ".*"}
    queries = {}
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in values.items():
                expr = expr.replace(variable, value)
            queries[f"{panel['title']} {target['refId']}"] = expr
    return queries


class Prometheus:
    """A Prometheus process scraping the operator (:class:`localcluster.process.Component`), and its HTTP API."""

    def __init__(self, workdir: Path, log_dir: Path, groups: list[JSON]) -> None:
        self.url = f"http://127.0.0.1:{PROMETHEUS}"
        rules = workdir / "rules.yaml"
        rules.write_text(yaml.safe_dump({"groups": groups}))
        self.config = workdir / "prometheus.yml"
        scrape = {"job_name": JOB, "honor_labels": True, "static_configs": [{"targets": [f"127.0.0.1:{METRICS}"]}]}
        self.config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(rules)],
                    "scrape_configs": [scrape],
                }
            )
        )
        self.tools = ensure("prometheus", "promtool")
        self.process = Component("prometheus", self.tools["prometheus"], workdir, log_dir)
        self.workdir = workdir
        self.started = 0.0

    def start(self) -> None:
        """``promtool check config``, then Prometheus, until it is ready."""
        check = subprocess.run(
            [str(self.tools["promtool"]), "check", "config", str(self.config)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert check.returncode == 0, check.stdout + check.stderr
        self.started = time.time()
        self.process.start(
            [
                f"--config.file={self.config}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{PROMETHEUS}",
            ]
        )
        self.process.wait_http_ok(f"{self.url}/-/ready", timeout=60)

    async def api(self, path: str, **params: str) -> Any:
        """``data`` of ``GET /api/v1/<path>``; fails on an error answer."""
        async with aiohttp.ClientSession() as http, http.get(f"{self.url}/api/v1/{path}", params=params) as r:
            body = await r.json()
        assert r.status == 200 and body["status"] == "success", (path, params, body)
        return body["data"]

    async def query(self, promql: str) -> list[JSON]:
        """An instant query's series."""
        result: list[JSON] = (await self.api("query", query=promql))["result"]
        return result

    async def value(self, promql: str) -> float | None:
        """The value of a query of one series (None when it has none)."""
        result = await self.query(promql)
        assert len(result) <= 1, (promql, result)
        return float(result[0]["value"][1]) if result else None

    async def over_the_run(self, promql: str) -> list[JSON]:
        """A range query's series from this Prometheus' start to now, a point every 2 s (as a panel asks)."""
        data = await self.api(
            "query_range", query=promql, start=f"{self.started:.3f}", end=f"{time.time():.3f}", step="2"
        )
        result: list[JSON] = data["result"]
        return result


@pytest.fixture(scope="module")
def monitoring() -> tuple[list[JSON], JSON]:
    return chart_monitoring()


@pytest.fixture(scope="module")
def prometheus(
    cluster: LocalCluster | ExternalCluster,
    monitoring: tuple[list[JSON], JSON],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Prometheus]:
    """Prometheus for this module, logging to ``<cluster state>/logs/prometheus.log``."""
    prom = Prometheus(tmp_path_factory.mktemp("prometheus"), cluster.state_dir / "logs", monitoring[0])
    prom.start()
    try:
        yield prom
    finally:
        prom.process.stop()


@pytest.fixture
async def scraping(prometheus: Prometheus) -> AsyncIterator[Prometheus]:
    """The Prometheus once it scrapes the operator (``up`` 1) and the operator leads its Lease."""

    async def up() -> bool:
        try:
            return await prometheus.value(f'up{{job="{JOB}"}}') == 1 and (
                await prometheus.value(f'leader_election_master_status{{job="{JOB}"}}') == 1
            )
        except aiohttp.ClientError:
            return False

    await wait_for(up, "Prometheus to scrape the operator, leading", timeout=60, interval=0.5)
    yield prometheus


async def test_a_real_prometheus_sees_the_lifecycle_the_training_and_every_panel(
    client: Client,
    ns: str,
    cluster: LocalCluster,
    real_nodes: RealNodes,
    scraping: Prometheus,
    monitoring: tuple[list[JSON], JSON],
    tmp_path: Path,
) -> None:
    prom = scraping
    cluster.run_kubectl("apply", "-n", ns, "-k", str(DIGITS))
    job = yaml.safe_load((DIGITS / "trainjob.yaml").read_text())
    # This cluster has KWOK nodes too: the real ones only.
    job["spec"]["podTemplateOverrides"] = [{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": NODE_SELECTOR}}]
    name = (await client.kube.create(TRAINJOBS, ns, job))["metadata"]["name"]

    tj = await trainjob_ended(client, ns, name)
    assert condition(tj, "Complete"), tj.get("status")
    series = f'namespace="{ns}", trainjob="{name}"'

    # The job's series go with it: gone from the next scrape on.
    async def gone() -> bool:
        return not await prom.query(f"kubeflow_trainer_trainjob_progress_ratio{{{series}}}")

    await wait_for(gone, "the finished TrainJob's series to go", timeout=30)

    # The lifecycle: as many Complete TrainJobs as the apiserver lists, this job's histograms once each.
    complete = sum(1 for t in (await client.kube.list(TRAINJOBS))[0] if condition(t, "Complete"))
    jobs = f'kubeflow_trainer_jobs{{job="{JOB}", kind="TrainJob", state="Complete"}}'
    assert await prom.value(f"max({jobs})") == complete >= 1
    assert await prom.value(f'max(kubeflow_trainer_jobs{{job="{JOB}", kind="TrainJob", state="Running"}})') == 0
    for histogram in ("admission_wait", "startup"):
        count = f'kubeflow_trainer_job_{histogram}_seconds_count{{job="{JOB}", kind="TrainJob", gang_scheduler="none"}}'
        assert await prom.value(count) == 1, histogram
    run = f'kubeflow_trainer_job_run_seconds_count{{job="{JOB}", kind="TrainJob", result="succeeded"}}'
    assert await prom.value(run) == 1
    assert await prom.value(f'sum(kubeflow_trainer_job_failures_total{{job="{JOB}"}})') is None, "nothing failed"

    # The training series, over the run.
    window = f"[{int(time.time() - prom.started) + 10}s]"
    progress = f"max_over_time(kubeflow_trainer_trainjob_progress_ratio{{{series}}}{window})"
    assert await prom.value(progress) == 1.0
    accuracy = await prom.value(
        f'max_over_time(kubeflow_trainer_trainjob_metric{{{series}, metric="accuracy"}}{window})'
    )
    assert accuracy is not None and accuracy > 0.85, accuracy
    loss = await prom.value(f'min_over_time(kubeflow_trainer_trainjob_metric{{{series}, metric="loss"}}{window})')
    assert loss is not None and 0 < loss < 1.0, loss
    assert await prom.value(f"max_over_time(kubeflow_trainer_trainjob_remaining_seconds{{{series}}}{window})")

    # trainer dashboard --prometheus-url draws the job's curves from this Prometheus, after the job ended.
    log = tmp_path / "dashboard.log"
    async with (
        trainer_dashboard(cluster, ns, DASHBOARD, log, "--prometheus-url", prom.url) as url,
        aiohttp.ClientSession() as session,
        session.get(f"{url}/jobs/{ns}/trainjobs/{name}") as resp,
    ):
        page = await resp.text()
    curves = dict(re.findall(r'<svg class="curve" data-metric="(\w+)".*?<polyline points="([^"]*)"', page, re.S))
    assert sorted(curves) == ["accuracy", "loss"], page
    assert all(len(points.split()) >= 10 for points in curves.values()), curves

    # Every panel of the dashboard has something to draw over the run (a counter born at the job's end
    # needs a few scrapes for a rate).
    queries, empty = panel_queries(monitoring[1]), list[str]()

    async def every_panel_drawn() -> bool:
        empty[:] = [title for title, expr in queries.items() if not await prom.over_the_run(expr)]
        return not empty

    with contextlib.suppress(AssertionError):
        await wait_for(every_panel_drawn, "a series for every panel's query", timeout=30, interval=1)
    assert len(queries) >= 15 and not empty, (empty, queries)

    # The PrometheusRule's groups loaded; every rule evaluated without error; none fires.
    groups = monitoring[0]

    async def evaluated() -> list[JSON] | None:
        loaded: list[JSON] = (await prom.api("rules"))["groups"]
        rules = [r for g in loaded for r in g["rules"]]
        return loaded if rules and all(r.get("health") == "ok" for r in rules) else None

    loaded = await wait_for(evaluated, "every rule evaluated", timeout=30)
    assert {g["name"]: [r["name"] for r in g["rules"]] for g in loaded} == {
        g["name"]: [r["alert"] for r in g["rules"]] for g in groups
    }
    assert not [r for g in loaded for r in g["rules"] if r.get("lastError")]
    assert [a for a in (await prom.api("alerts"))["alerts"] if a["state"] == "firing"] == []

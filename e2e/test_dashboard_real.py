"""``trainer dashboard`` in a real browser (headless Chromium, :mod:`e2e.browser`) while the digits
sample (``config/samples/digits``) trains on two real nodes and posts its progress, loss and accuracy to
the operator's status server (at the pod network's gateway): the jobs page lists the TrainJob with its
state; its page, open while it trains, draws a loss curve of at least 10 points sampled by the dashboard
(one a second); after Complete the page says Complete. Screenshots of both pages go to the test's
directory.

Runs where real nodes can (:func:`localcluster.realnode.node.unavailable`), else is skipped with its
reason; ``TRAINER_E2E_REAL=0`` skips it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from e2e import browser
from e2e.helpers import trainer_dashboard
from e2e.test_real_workload import DIGITS
from localcluster import LocalCluster
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import reserved_ports
from localcluster.realnode.node import NODE_SELECTOR, RealNodes, status_server_args, unavailable
from trainer.api.kinds import TRAINJOBS
from trainer.framework.json_codec import JSON

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable() or browser.unavailable()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(WHY_NOT is not None, reason=f"real pods: {WHY_NOT}")]

STATUS_PORT, DASHBOARD_PORT = reserved_ports(2)
OPERATOR_ARGS = status_server_args(STATUS_PORT)
EPOCHS = 150
"""Enough for the dashboard to sample the job's metrics at least 10 times (one a second) while it trains:
about a minute of training on two real nodes."""
POINTS = 10


@pytest.fixture
async def dashboard(cluster: LocalCluster, ns: str, tmp_path: Path) -> AsyncIterator[str]:
    """``trainer dashboard`` on the namespace, sampling every second: its URL once it serves its jobs page."""
    flags = ("--sample-interval", "1", "--refresh", "2")
    async with trainer_dashboard(cluster, ns, DASHBOARD_PORT, tmp_path / "dashboard.log", *flags) as url:
        yield url


def true(obj: JSON | None, type_: str) -> bool:
    return (condition(obj, type_) or {}).get("status") == "True"


def cell(driver: WebDriver, css: str) -> str:
    """The text of the first element ``css`` selects, "" when there is none."""
    found = driver.find_elements(By.CSS_SELECTOR, css)
    return str(found[0].text) if found else ""


def loss_points(driver: WebDriver) -> int:
    """Points of the loss curve's polyline, as the page draws it (0 without one)."""
    found = driver.find_elements(By.CSS_SELECTOR, 'svg.curve[data-metric="loss"] polyline')
    return len((found[0].get_dom_attribute("points") or "").split()) if found else 0


async def test_the_dashboard_shows_a_real_job_training_with_its_curves(
    client: Client,
    ns: str,
    cluster: LocalCluster,
    real_nodes: RealNodes,
    dashboard: str,
    tmp_path: Path,
) -> None:
    cluster.run_kubectl("apply", "-n", ns, "-k", str(DIGITS))
    job = yaml.safe_load((DIGITS / "trainjob.yaml").read_text())
    job["spec"]["trainer"]["env"] = [{"name": "EPOCHS", "value": str(EPOCHS)}]
    job["spec"]["podTemplateOverrides"] = [{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": NODE_SELECTOR}}]
    name = (await client.kube.create(TRAINJOBS, ns, job))["metadata"]["name"]

    async def finished() -> JSON | None:
        tj = await client.trainjob(ns, name) or {}
        return tj if true(tj, "Complete") or true(tj, "Failed") else None

    async def reporting() -> JSON | None:
        tj = await client.trainjob(ns, name) or {}
        reported = ((tj.get("status") or {}).get("trainerStatus") or {}).get("metrics")
        return tj if reported or true(tj, "Complete") or true(tj, "Failed") else None

    with browser.chromium() as driver:
        driver.get(f"{dashboard}/")
        row = f'tr.job[data-name="{name}"]'
        assert cell(driver, f"{row} td.state") in ("Created", "Running"), driver.page_source

        tj = await wait_for(reporting, f"{name} reporting metrics", timeout=400, interval=0.5)
        assert not true(tj, "Complete"), "the job finished before the page could sample it"
        driver.get(f"{dashboard}/")
        assert cell(driver, f"{row} td.state") == "Running"
        assert driver.find_elements(By.CSS_SELECTOR, f"{row} progress")

        driver.find_element(By.LINK_TEXT, name).click()
        seen: list[int] = []

        async def drawn() -> bool:
            driver.refresh()
            seen.append(loss_points(driver))
            return seen[-1] >= POINTS

        await wait_for(drawn, f"a loss curve of {POINTS} points", timeout=120, interval=1)
        running = await client.trainjob(ns, name) or {}
        driver.save_screenshot(str(tmp_path / "dashboard-job.png"))
        assert not true(running, "Complete"), f"{POINTS} points were drawn while it trained: {seen}"
        assert cell(driver, "table#summary td.state") == "Running"
        assert driver.find_elements(By.CSS_SELECTOR, 'svg.curve[data-metric="accuracy"] polyline')
        pods = driver.find_elements(By.CSS_SELECTOR, "table#pods tr")[1:]
        assert {p.find_elements(By.TAG_NAME, "td")[2].text for p in pods} == set(real_nodes.names)

        driver.set_window_size(1000, 300)
        driver.get(f"{dashboard}/")
        assert cell(driver, f"{row} td.state") == "Running"
        driver.save_screenshot(str(tmp_path / "dashboard-jobs.png"))
        driver.set_window_size(1280, 1400)
        driver.back()

        tj = await wait_for(finished, f"{name} to finish", timeout=600, interval=1)
        assert true(tj, "Complete"), tj.get("status")
        driver.refresh()
        assert cell(driver, "table#summary td.state") == "Complete"
        logs = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "pre.log")]
        assert any("held-out accuracy" in text for text in logs), logs
        driver.save_screenshot(str(tmp_path / "dashboard-job-complete.png"))
    print(f"screenshots in {tmp_path}; loss points seen: {seen}")

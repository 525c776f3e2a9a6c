"""An OptimizationJob on two real nodes (kubelet + containerd), its operator killed mid-search.

The digits sample's search (``config/samples/digits/optimizationjob.yaml``): 6 trials, 2 at a time, of a
seeded random search over the learning rate (``logUniform``) and SGD's momentum (``uniform``), maximizing
the held-out ``accuracy`` each trial's rank 0 posts to the operator's status server. Every trial is a
TrainJob whose pod really trains (1 node x 2 processes, 5 epochs) with the parameters the search chose
(``KUBEFLOW_TRAINER_OPT_LR``, ``KUBEFLOW_TRAINER_OPT_MOMENTUM``; its log says which it used).

Once a trial has finished and another one is training, the operator is killed with SIGKILL and stays
down until a trial that was running has ended (or 20 s): its trainer's posts are refused (the sample
posts its last report again until the status server takes it), its TrainJob is not marked Complete,
no trial is created. A new operator process then takes over and the
search finishes. Every second, a sampler counts the trials not finished (and of those, the ones with
pods still active) and records each trial's uid. Asserted: never more than ``parallelTrials`` trials
unfinished, running pods, or counted in ``status.trialsRunning``, and that many did run at once;
exactly 6 trials, each created once (one uid per name over the whole run, one per index label), with
the seed's parameters (:func:`trainer.optimizationjob.search.next_assignments`), which their trainers
logged; the job ``Complete`` (``MaxTrialsReached``) naming as ``result`` the trial with the highest
accuracy its ``status.trainerStatus.metrics`` holds (the lowest index on a tie); every
``trialResults`` value is that trial's last report, every trial reported one (the last report refused
while the operator was down is posted again) and succeeded; the operators' log holds no error. The
table of trials (``-s`` shows it) gives each trial's uid, parameters, last reported accuracy and
progress, its TrainJob's end and its state in the search.

``trainer dashboard`` runs meanwhile with the OptimizationJob's page open in headless Chromium
(:mod:`e2e.browser`, when one can run here; the page refreshes itself, so the dashboard samples the
trials every second); once the search ended, the page lists the 6 trials, marks the best and draws the
accuracy of the trials over time (a line for each of at least 4 trials) and per trial index; its
screenshot goes to the test's directory.

Runs where real nodes can (:func:`localcluster.realnode.node.unavailable`, ``make test`` included), else
is skipped with its reason; ``TRAINER_E2E_REAL=0`` skips it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from e2e import browser
from e2e.helpers import ROOT, trainer_dashboard
from localcluster import LocalCluster
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import reserved_ports
from localcluster.operator_process import Operator
from localcluster.realnode.node import NODE_SELECTOR, RealNodes, status_server_args, unavailable
from trainer.api.kinds import OPTIMIZATION_JOBS, PODS, TRAINJOBS
from trainer.api.labels import JOBSET_NAME, OPTIMIZATION_JOB_NAME, TRIAL_INDEX
from trainer.api.optimizationjob import OptimizationJobSpec
from trainer.framework.json_codec import JSON
from trainer.optimizationjob.search import next_assignments
from trainer.optimizationjob.trials import parameters_of

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(WHY_NOT is not None, reason=f"real pods: {WHY_NOT}")]
STATUS_PORT, DASHBOARD_PORT = reserved_ports(2)
OPERATOR_ARGS = status_server_args(STATUS_PORT)
QUIET_LOG = True
"""Both operator processes, the killed one and the one after it, log nothing at error and only JSON."""
DIGITS = ROOT / "config" / "samples" / "digits"
NAME = "tune"
TRIALS = 6
PARALLEL = 2
SEED = 7
ACTIVE_PHASES = ("Pending", "Running")


def search() -> JSON:
    """The sample's OptimizationJob named :data:`NAME`, its trials kept on the real nodes."""
    job: JSON = yaml.safe_load((DIGITS / "optimizationjob.yaml").read_text())
    del job["metadata"]["generateName"]
    job["metadata"]["name"] = NAME
    spec = job["spec"]
    assert (spec["numTrials"], spec["parallelTrials"]) == (TRIALS, PARALLEL), spec
    assert spec["searchAlgorithm"] == {"random": {"seed": SEED}}, spec
    spec["trainJobTemplate"]["spec"]["podTemplateOverrides"] = [
        {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": NODE_SELECTOR}}
    ]
    return job


def finished(trial: JSON) -> bool:
    """The trial TrainJob is Complete or Failed."""
    return any((c := condition(trial, t)) is not None and c.get("status") == "True" for t in ("Complete", "Failed"))


def metrics(trial: JSON) -> dict[str, float]:
    """The last metrics the trial reported (``status.trainerStatus.metrics``), by name."""
    reported = ((trial.get("status") or {}).get("trainerStatus") or {}).get("metrics") or []
    return {m["name"]: float(m["value"]) for m in reported}


@dataclass(frozen=True)
class Sample:
    """One look at the search: its trials (name -> uid), which of them are not finished, which of those
    have pods not yet ended, and the job's ``status.trialsRunning``."""

    at: float
    uids: dict[str, str]
    unfinished: frozenset[str]
    running: frozenset[str]
    status_running: int
    finished: frozenset[str]


async def look(client: Client, ns: str) -> Sample:
    """The search now: the trials from one list (consistent among themselves), the pods from another."""
    trials, _ = await client.kube.list(TRAINJOBS, ns, f"{OPTIMIZATION_JOB_NAME}={NAME}")
    pods, _ = await client.kube.list(PODS, ns)
    job = await client.kube.get(OPTIMIZATION_JOBS, ns, NAME)
    active = {
        p["metadata"]["labels"].get(JOBSET_NAME)
        for p in pods
        if (p.get("status") or {}).get("phase") in ACTIVE_PHASES and not p["metadata"].get("deletionTimestamp")
    }
    names = {t["metadata"]["name"]: t for t in trials}
    unfinished = frozenset(n for n, t in names.items() if not finished(t))
    return Sample(
        at=time.monotonic(),
        uids={n: t["metadata"]["uid"] for n, t in names.items()},
        unfinished=unfinished,
        running=frozenset(unfinished & active),
        status_running=int((job.get("status") or {}).get("trialsRunning") or 0),
        finished=frozenset(names) - unfinished,
    )


@dataclass
class Sampler:
    """Looks at the search every second until stopped."""

    client: Client
    ns: str
    samples: list[Sample] = field(default_factory=list)

    async def run(self) -> None:
        while True:
            self.samples.append(await look(self.client, self.ns))
            await asyncio.sleep(1)


@dataclass
class Kill:
    """When the operator was killed and started again, and what ran then."""

    at: Sample | None = None
    down_seconds: float = 0.0
    ended_while_down: list[str] = field(default_factory=list)


async def kill_mid_search(client: Client, ns: str, operator: Operator) -> Kill:
    """Once a trial finished and another reported an epoch and has pods active: SIGKILL the operator,
    wait until a trial that was running has no pod active any more (at most 20 s), start it again."""

    async def mid_search() -> Sample | None:
        now = await look(client, ns)
        if not now.finished:
            return None
        trials, _ = await client.kube.list(TRAINJOBS, ns, f"{OPTIMIZATION_JOB_NAME}={NAME}")
        reporting = {t["metadata"]["name"] for t in trials if "accuracy" in metrics(t)}
        return now if now.running & reporting else None

    kill = Kill()
    kill.at = await wait_for(mid_search, "a trial finished while another trains", timeout=600, interval=0.5)
    operator.kill()
    down = time.monotonic()

    async def one_ended() -> list[str] | None:
        now = await look(client, ns)
        assert kill.at is not None
        ended = sorted(kill.at.running - now.running)
        return ended or None

    with contextlib.suppress(AssertionError):
        kill.ended_while_down = await wait_for(one_ended, "a running trial's pods to end", timeout=20, interval=0.5)
    kill.down_seconds = time.monotonic() - down
    operator.start()
    return kill


def table(trials: list[JSON], status: JSON) -> str:
    """One line per trial: name, uid, parameters, the accuracy and progress it last reported, its
    TrainJob's end and its state in the search (``status.trialResults``; the best one marked), then
    why each trial the search counts as failed failed."""
    results = {r["name"]: r for r in status.get("trialResults") or []}
    best = (status.get("result") or {}).get("trainJobName")
    rows = [("TRIAL", "UID", "LR", "MOMENTUM", "ACCURACY", "PROGRESS", "TRAINJOB", "SEARCH")]
    why = []
    for t in trials:
        name = t["metadata"]["name"]
        params = {e["name"]: e["value"] for e in t["spec"]["trainer"]["env"]}
        reported = metrics(t)
        progress = ((t.get("status") or {}).get("trainerStatus") or {}).get("progressPercentage")
        ended = next((c for c in ("Complete", "Failed") if (condition(t, c) or {}).get("status") == "True"), "-")
        result = results.get(name) or {}
        rows.append(
            (
                name,
                t["metadata"]["uid"],
                params.get("KUBEFLOW_TRAINER_OPT_LR", "-"),
                params.get("KUBEFLOW_TRAINER_OPT_MOMENTUM", "-"),
                f"{reported['accuracy']:.4f}" if "accuracy" in reported else "-",
                f"{progress}%" if progress is not None else "-",
                ended,
                result.get("state", "-") + (" (best)" if name == best else ""),
            )
        )
        if result.get("message"):
            why.append(f"{name}: {result['message']}")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines + why)


def logs(cluster: LocalCluster, ns: str, trial: str) -> str:
    return cluster.run_kubectl("logs", "-n", ns, "-l", f"{JOBSET_NAME}={trial}", "--tail", "-1", check=False).stdout


def page_shows_the_search(driver: WebDriver, best: str, path: Path) -> None:
    """The OptimizationJob page ``driver`` has kept open (it refreshes itself, so the dashboard sampled the
    trials meanwhile): 6 trial rows, ``best`` marked, the trials' accuracy over time (a line for each of
    at least 4) and per trial index drawn; its screenshot at ``path``."""
    driver.refresh()
    rows = driver.find_elements(By.CSS_SELECTOR, "tr.trial")
    assert len(rows) == TRIALS, driver.page_source
    marked = [r.get_dom_attribute("data-name") for r in driver.find_elements(By.CSS_SELECTOR, "tr.trial.best")]
    assert marked == [best], (marked, best)
    over_time = driver.find_elements(By.CSS_SELECTOR, 'svg[data-plot="accuracy over time"] polyline')
    assert len(over_time) >= 4, driver.page_source
    (by_index,) = driver.find_elements(By.CSS_SELECTOR, 'svg[data-plot="accuracy by trial"] polyline')
    assert len((by_index.get_dom_attribute("points") or "").split()) == TRIALS, driver.page_source
    driver.save_screenshot(str(path))


async def test_a_search_on_real_nodes_survives_an_operator_kill_without_repeating_or_exceeding_its_trials(
    client: Client, ns: str, cluster: LocalCluster, real_nodes: RealNodes, operator: Operator, tmp_path: Path
) -> None:
    flags = ("--sample-interval", "1", "--refresh", "2")
    async with trainer_dashboard(cluster, ns, DASHBOARD_PORT, tmp_path / "dashboard.log", *flags) as dashboard:
        with contextlib.ExitStack() as stack:
            driver = stack.enter_context(browser.chromium()) if browser.unavailable() is None else None
            page = f"{dashboard}/jobs/{ns}/optimizationjobs/{NAME}"
            await search_survives_a_kill(client, ns, cluster, operator, (driver, page), tmp_path)


async def search_survives_a_kill(
    client: Client,
    ns: str,
    cluster: LocalCluster,
    operator: Operator,
    viewer: tuple[WebDriver | None, str],
    tmp_path: Path,
) -> None:
    began = time.monotonic()
    cluster.run_kubectl("apply", "-n", ns, "-k", str(DIGITS))
    await client.kube.create(OPTIMIZATION_JOBS, ns, search())
    driver, page = viewer
    if driver is not None:  # viewed while it runs: the dashboard samples what its pages show
        driver.set_window_size(1280, 1500)
        driver.get(page)
    sampler = Sampler(client, ns)
    sampling = asyncio.create_task(sampler.run())
    try:
        kill = await kill_mid_search(client, ns, operator)

        async def complete() -> JSON | None:
            job = await client.kube.get(OPTIMIZATION_JOBS, ns, NAME)
            return job if finished(job) else None

        await wait_for(complete, f"OptimizationJob {NAME} to end", timeout=900, interval=1)

        async def settled() -> JSON | None:
            # A trial's last report may be written just after its TrainJob completed: its echo brings
            # one more reconcile of the job.
            job, (trials, _) = await asyncio.gather(
                client.kube.get(OPTIMIZATION_JOBS, ns, NAME),
                client.kube.list(TRAINJOBS, ns, f"{OPTIMIZATION_JOB_NAME}={NAME}"),
            )
            reported = {t["metadata"]["name"]: metrics(t).get("accuracy") for t in trials}
            recorded = {r["name"]: r.get("value") for r in job["status"].get("trialResults") or []}
            same = all(v is None or float(recorded.get(n) or "nan") == v for n, v in reported.items())
            return job if same else None

        with contextlib.suppress(AssertionError):
            await wait_for(settled, "the job's trialResults to hold the trials' last reports", timeout=15)
        job = await client.kube.get(OPTIMIZATION_JOBS, ns, NAME)
    finally:
        sampling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampling
    items, _ = await client.kube.list(TRAINJOBS, ns, f"{OPTIMIZATION_JOB_NAME}={NAME}")
    trials = sorted(items, key=lambda t: int(t["metadata"]["labels"][TRIAL_INDEX]))
    status = job["status"]
    best = (status.get("result") or {}).get("trainJobName", "")
    samples = sampler.samples
    assert kill.at is not None
    print(
        f"\n{len(samples)} samples; operator killed at {kill.at.at - began:.0f} s with "
        f"{sorted(kill.at.finished)} finished and {sorted(kill.at.running)} running, "
        f"down {kill.down_seconds:.1f} s ({kill.ended_while_down or 'no trial'} ended meanwhile); "
        f"the search ended after {time.monotonic() - began:.0f} s"
    )
    print(table(trials, status))
    print(f"conditions: {[(c['type'], c['status'], c['reason']) for c in status['conditions']]}")

    # Never more than parallelTrials at a time, whoever counts; and that many did run at once.
    peak = max(len(s.running) for s in samples)
    assert peak <= PARALLEL, [sorted(s.running) for s in samples]
    assert peak == PARALLEL, "two trials never trained at once"
    assert max(len(s.unfinished) for s in samples) <= PARALLEL, [sorted(s.unfinished) for s in samples]
    assert max(s.status_running for s in samples) <= PARALLEL, [s.status_running for s in samples]
    # Each trial created once: one uid per name over the whole run, one trial per index.
    seen: dict[str, set[str]] = {}
    for s in samples:
        for name, uid in s.uids.items():
            seen.setdefault(name, set()).add(uid)
    assert all(len(uids) == 1 for uids in seen.values()), seen
    names = [t["metadata"]["name"] for t in trials]
    indices = [t["metadata"]["labels"][TRIAL_INDEX] for t in trials]
    assert names == [f"{NAME}-trial-{i}" for i in range(TRIALS)], names
    assert indices == [str(i) for i in range(TRIALS)], indices
    assert len({t["metadata"]["uid"] for t in trials}) == TRIALS
    assert {n: u.pop() for n, u in seen.items()} == {t["metadata"]["name"]: t["metadata"]["uid"] for t in trials}
    # The parameters are the seed's sequence, as on any cluster; each trainer trained with its trial's.
    drawn = next_assignments(OptimizationJobSpec.model_validate(search()["spec"]), SEED, [], range(TRIALS))
    assert [parameters_of(t) for t in trials] == [drawn[i] for i in range(TRIALS)]
    for t in trials:
        env = {e["name"]: e["value"] for e in t["spec"]["trainer"]["env"]}
        lr, momentum = float(env["KUBEFLOW_TRAINER_OPT_LR"]), float(env["KUBEFLOW_TRAINER_OPT_MOMENTUM"])
        text = logs(cluster, ns, t["metadata"]["name"])
        assert f"lr {lr} momentum {momentum} epochs 5" in text, (t["metadata"]["name"], text)
    # Complete, naming the trial of the highest reported accuracy; each recorded value is the trial's.
    done = condition(job, "Complete")
    assert done is not None and done["status"] == "True" and done["reason"] == "MaxTrialsReached", status
    assert condition(job, "Failed") is None, status
    accuracy = {t["metadata"]["name"]: metrics(t)["accuracy"] for t in trials if "accuracy" in metrics(t)}
    top = max(accuracy.values())
    assert best == min((n for n, a in accuracy.items() if a == top), key=names.index), (best, accuracy)
    recorded = {r["name"]: float(r["value"]) for r in status["trialResults"] if "value" in r}
    assert recorded == accuracy, (recorded, accuracy)
    assert status["trials"] == TRIALS and status["trialsRunning"] == 0, status
    assert status["trialsSucceeded"] == len(accuracy), status
    # Every trial has its objective: a last report refused while the operator was down is posted again.
    assert sorted(accuracy) == sorted(names), (accuracy, status["trialResults"])
    # The dashboard's page of the search: every trial, the best marked, the curves it sampled meanwhile.
    if driver is not None:
        shot = tmp_path / "dashboard-optimizationjob.png"
        page_shows_the_search(driver, best, shot)
        print(f"dashboard screenshot: {shot}")

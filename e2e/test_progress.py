"""Progress end to end on the real local cluster: the operator runs its status server (URL mode,
127.0.0.1, ``--status-write-interval 5``); a TrainJob's trainer pods get the ``KUBEFLOW_TRAINER_SERVER_*``
environment, the projected token volume and the CA ConfigMap; a pod's own token (minted with the
TokenRequest API for the pod's ServiceAccount, bound to the pod, with the TrainJob's audience, as the
kubelet mints it for the projected volume: KWOK pods run no containers) posts progress, which shows in
``status.trainerStatus``, ``kubectl get trainjobs`` and ``trainer get``; a token bound to another
TrainJob's pod, to a pod that only carries the TrainJob's label, or none, is refused; 1,000 posts in
10 s make at most one status write per interval, counted on a watch of the TrainJob (every change of
``trainerStatus`` is one write)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from e2e.helpers import ROOT
from e2e.test_trainjob import RUN_FOR, rjob, runtime, trainjob
from localcluster.client import Client, wait_for
from localcluster.cluster import reserved_ports
from localcluster.operator_process import Operator
from trainer.api.kinds import CONFIGMAPS, PODS, SERVICE_ACCOUNTS, TRAINJOBS
from trainer.framework.json_codec import JSON
from trainer.trainjob.spec.injection import token_audience

pytestmark = pytest.mark.e2e

(PORT,) = reserved_ports(1)
INTERVAL = 5
OPERATOR_ARGS = [
    "--status-server-port",
    str(PORT),
    "--status-server-host",
    "127.0.0.1",
    "--status-write-interval",
    str(INTERVAL),
]


@pytest.fixture(scope="module", autouse=True)
async def serving(operator: Operator) -> None:
    """Wait until the operator's status server accepts connections."""

    async def up() -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", PORT)
        except OSError:
            return False
        writer.close()
        return True

    await wait_for(up, f"status server on 127.0.0.1:{PORT}", timeout=60)


async def start_jobs(client: Client, ns: str, *names: str) -> dict[str, JSON]:
    """A runtime whose trainer pods run under the ``default`` ServiceAccount for a long while, and one
    TrainJob per name; returns each job's running pod."""
    node = rjob("node", "trainer", RUN_FOR)
    node["template"]["spec"]["template"]["spec"]["serviceAccountName"] = "default"
    await client.apply(runtime("rt", node), ns)
    for name in names:
        await client.apply(trainjob(name, "rt", trainer={"numNodes": 1}), ns)
    pods: dict[str, JSON] = {}
    for name in names:

        async def running(job: str = name) -> JSON | None:
            found = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={job}")
            return next((p for p in found if (p.get("status") or {}).get("phase") == "Running"), None)

        pods[name] = await wait_for(running, f"a running pod of {ns}/{name}", timeout=90)
    await wait_for(lambda: client.kube.get_or_none(SERVICE_ACCOUNTS, ns, "default"), f"ServiceAccount {ns}/default")
    return pods


def env_of(pod: JSON) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env") or []}


@contextlib.asynccontextmanager
async def session_for(client: Client, ns: str, job: str) -> AsyncIterator[aiohttp.ClientSession]:
    """An HTTPS session trusting only the CA of the job's ConfigMap (what the pod mounts as ca.crt)."""

    async def published() -> JSON | None:
        return await client.kube.get_or_none(CONFIGMAPS, ns, f"{job}-tls-config")

    cm = await wait_for(published, f"ConfigMap {ns}/{job}-tls-config")
    ctx = ssl.create_default_context(cadata=cm["data"]["ca.crt"])
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=50)) as session:
        yield session


async def post(session: aiohttp.ClientSession, url: str, body: JSON, token: str | None) -> tuple[int, JSON]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with session.post(url, json=body, headers=headers) as resp:
        return resp.status, await resp.json(content_type=None)


def column(output: str, name: str, row: str) -> str:
    """The cell of column ``name`` in the row starting with ``row`` of a kubectl-like table."""
    lines = output.splitlines()
    header = lines[0]
    start = header.index(name)
    rest = header[start + len(name) :]
    end = start + len(name) + (len(rest) - len(rest.lstrip())) if rest.strip() else None
    line = next(line for line in lines[1:] if line.split()[0] == row)
    return line[start:end].strip()


async def trainer_status(client: Client, ns: str, name: str) -> JSON | None:
    tj = await client.trainjob(ns, name)
    return ((tj or {}).get("status") or {}).get("trainerStatus")


async def test_a_pod_posts_progress_with_its_own_token_and_kubectl_shows_it(
    client: Client, cluster: Any, ns: str
) -> None:
    pods = await start_jobs(client, ns, "a")
    pod = pods["a"]
    env = env_of(pod)
    url = f"https://127.0.0.1:{PORT}/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/a/status"
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == url
    assert env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] == "/var/run/secrets/kubeflow/trainer/ca.crt"
    assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "kubeflow-trainer-token"]
    sources = volume["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["audience"] == token_audience(ns, "a")
    assert sources[1]["configMap"]["name"] == "a-tls-config"

    token = await client.pod_token(pod, token_audience(ns, "a"))
    body = {
        "trainerStatus": {
            "progressPercentage": 42,
            "estimatedRemainingSeconds": 3600,
            "metrics": [{"name": "loss", "value": "0.2347"}, {"name": "accuracy", "value": "0.91"}],
            "lastUpdatedTime": "2026-01-23T10:30:45Z",
        }
    }
    async with session_for(client, ns, "a") as session:
        code, answer = await post(session, url, body, token)
    assert code == 200, answer
    assert answer == body

    async def landed() -> JSON | None:
        got = await trainer_status(client, ns, "a")
        return got if got and got.get("progressPercentage") == 42 else None

    assert await wait_for(landed, "trainerStatus of a") == body["trainerStatus"]

    got = cluster.run_kubectl("get", "trainjobs", "-n", ns).stdout
    assert (column(got, "PROGRESS", "a"), column(got, "ETA", "a")) == ("42", "3600"), got
    cli = [sys.executable, "-m", "trainer.cli", "--kubeconfig", str(cluster.kubeconfig), "-n", ns]
    shown = subprocess.run([*cli, "get", "tj", "a"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert (column(shown.stdout, "PROGRESS", "a"), column(shown.stdout, "ETA", "a")) == ("42%", "1h"), shown
    described = subprocess.run([*cli, "describe", "a"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "Progress:" in described.stdout and "42%" in described.stdout and "0.2347" in described.stdout


async def test_a_token_of_another_jobs_pod_or_none_is_refused(client: Client, ns: str) -> None:
    pods = await start_jobs(client, ns, "a", "b")
    url = f"https://127.0.0.1:{PORT}/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/a/status"
    body = {"trainerStatus": {"progressPercentage": 99}}
    async with session_for(client, ns, "a") as session:
        # b's pod asking for a's audience (its pod spec is the user's to write): authenticated, not a's pod.
        code, answer = await post(session, url, body, await client.pod_token(pods["b"], token_audience(ns, "a")))
        assert (code, answer["reason"]) == (403, "Forbidden"), answer
        assert f"does not belong to TrainJob {ns}/a" in answer["message"]
        # b's own token (b's audience) is not valid for a.
        code, answer = await post(session, url, body, await client.pod_token(pods["b"], token_audience(ns, "b")))
        assert (code, answer["reason"]) == (401, "Unauthorized"), answer
        code, answer = await post(session, url, body, None)
        assert (code, answer["reason"]) == (401, "Unauthorized"), answer
        code, _ = await post(session, url, body, "not-a-token")
        assert code == 401
        # A pod anyone may create with a's label, outside a's controller chain (Pod -> Job -> TrainJob).
        forged = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "forged", "labels": {"jobset.sigs.k8s.io/jobset-name": "a"}},
            "spec": {"serviceAccountName": "default", "containers": [{"name": "node", "image": "busybox"}]},
        }
        forged = await client.kube.create(PODS, ns, forged)
        code, answer = await post(session, url, body, await client.pod_token(forged, token_audience(ns, "a")))
        assert (code, answer["reason"]) == (403, "Forbidden"), answer
        assert "its controller is nothing, not a Job" in answer["message"], answer
        # a's own pod is let in.
        code, answer = await post(session, url, body, await client.pod_token(pods["a"], token_audience(ns, "a")))
        assert code == 200, answer
    assert await wait_for(lambda: trainer_status(client, ns, "a"), "trainerStatus of a")
    assert await trainer_status(client, ns, "b") is None


async def test_a_thousand_posts_in_ten_seconds_make_at_most_one_write_per_interval(client: Client, ns: str) -> None:
    pods = await start_jobs(client, ns, "a")
    token = await client.pod_token(pods["a"], token_audience(ns, "a"))
    url = env_of(pods["a"])["KUBEFLOW_TRAINER_SERVER_URL"]
    tj = await client.trainjob(ns, "a")
    assert tj is not None
    changes: list[JSON | None] = []

    async def watch() -> None:
        seen = (tj.get("status") or {}).get("trainerStatus")
        rv = tj["metadata"]["resourceVersion"]
        async for typ, obj in client.kube.watch(TRAINJOBS, ns, rv, field_selector="metadata.name=a"):
            now = (obj.get("status") or {}).get("trainerStatus")
            if typ == "MODIFIED" and now != seen:
                changes.append(now)
                seen = now

    watcher = asyncio.ensure_future(watch())
    try:
        async with session_for(client, ns, "a") as session:
            codes: list[int] = []

            async def one(i: int) -> None:
                body = {"trainerStatus": {"progressPercentage": i % 101, "estimatedRemainingSeconds": 1000 - i}}
                codes.append((await post(session, url, body, token))[0])

            await asyncio.sleep(0.5)  # the watch is open
            start = time.monotonic()
            tasks = []
            for i in range(1000):  # 100 per second, paced
                await asyncio.sleep(max(0.0, start + i * 0.01 - time.monotonic()))
                tasks.append(asyncio.ensure_future(one(i)))
            await asyncio.gather(*tasks)
            spent = time.monotonic() - start
        assert codes == [200] * 1000
        assert spent >= 9.9

        async def last_written() -> JSON | None:
            got = await trainer_status(client, ns, "a")
            return got if got and got.get("estimatedRemainingSeconds") == 1 else None

        await wait_for(last_written, "the last post written", timeout=INTERVAL + 40)
        await asyncio.sleep(1)  # the watch delivers it
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    allowed = 1 + math.ceil(spent / INTERVAL)
    print(f"{len(changes)} trainerStatus writes for 1000 posts in {spent:.1f} s (at most {allowed})")
    assert 2 <= len(changes) <= allowed, (len(changes), spent, changes)
    assert (changes[-1] or {}).get("estimatedRemainingSeconds") == 1, "the latest post is what stays"

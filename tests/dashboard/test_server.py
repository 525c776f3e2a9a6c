"""The dashboard's server over the recording double of the Kube interface: the jobs page lists what the
apiserver holds, only GET is served, a job outside the namespace served is not shown, the sampler adds
a point per reported metric of a viewed job, and nothing is ever written."""

from __future__ import annotations

from aiohttp.test_utils import TestClient, TestServer

from tests.kube_double import RecordingKube
from trainer.client import AsyncTrainerClient
from trainer.dashboard.samples import Samples
from trainer.dashboard.server import HEADERS, Dashboard

KEY = ("TrainJob", "team-a", "digits-a")


def kube_with_a_job() -> RecordingKube:
    kube = RecordingKube()
    kube.put(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "digits-a", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"runtimeRef": {"name": "torch-digits"}},
            "status": {
                "trainerStatus": {
                    "progressPercentage": 30,
                    "metrics": [{"name": "loss", "value": "0.5"}],
                    "lastUpdatedTime": "2026-01-01T00:01:00Z",
                }
            },
        }
    )
    return kube


async def test_the_jobs_page_is_served_by_get_only_and_writes_nothing() -> None:
    kube = kube_with_a_job()
    board = Dashboard(AsyncTrainerClient(kube, "team-a"))  # type: ignore[arg-type]
    async with TestClient(TestServer(board.app())) as http:
        page = await http.get("/")
        text = await page.text()
        assert page.status == 200 and 'data-name="digits-a"' in text and 'value="30"' in text
        assert all(page.headers[k] == v for k, v in HEADERS.items())
        assert (await http.post("/")).status == 405
        outside = await http.get("/jobs/team-b/trainjobs/digits-a")
        assert outside.status == 404 and "namespace team-a" in await outside.text()
        assert (await http.get("/jobs/team-a/pods/digits-a")).status == 404
    assert kube.writes == []


async def test_the_sampler_samples_viewed_jobs_only() -> None:
    kube = kube_with_a_job()
    board = Dashboard(AsyncTrainerClient(kube, "team-a"), samples=Samples(gap=0))  # type: ignore[arg-type]
    assert await board.sample_once() == 0
    board.samples.viewed(KEY, 0)
    board.samples.viewed(("TrainJob", "team-a", "gone"), 0)
    board.samples.viewed(("MPIJob", "team-a", "digits-a"), 0)
    board.samples.viewed_for = float("inf")
    assert await board.sample_once() == 1
    assert await board.sample_once() == 1
    assert [v for _, v in board.samples.curves(KEY)["loss"]] == [0.5, 0.5]
    assert kube.writes == []

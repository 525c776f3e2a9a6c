"""The dashboard's pages rendered from objects: what a tenant writes into its objects (names, messages,
log lines, metric names) is text, never markup; the progress bar, the curves' points and the empty
states."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any

from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.client import Event
from trainer.dashboard import render
from trainer.dashboard.gather import JobDetail, PodLog

NOW = datetime(2026, 1, 1, 0, 10, 0, tzinfo=UTC)
EVIL = '<script>alert(1)</script><img src=x onerror="alert(2)">'


class Tags(HTMLParser):
    """The start tags of a page, with their attributes."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag]


def trainjob(name: str = "digits-a", *, status: dict[str, Any] | None = None, **meta: Any) -> TrainJob:
    if status and "trainerStatus" in status:
        status["trainerStatus"] = {"lastUpdatedTime": "2026-01-01T00:09:00Z", **status["trainerStatus"]}
    return TrainJob.model_validate(
        {
            "metadata": {"name": name, "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z", **meta},
            "spec": {"runtimeRef": {"name": "torch-digits"}},
            **({"status": status} if status is not None else {}),
        }
    )


def test_the_jobs_page_lists_state_queue_progress_eta_and_age() -> None:
    job = trainjob(
        labels={"kueue.x-k8s.io/queue-name": "team-q"},
        status={
            "conditions": [{"type": "Running", "status": "True", "reason": "Ready"}],
            "trainerStatus": {"progressPercentage": 45, "estimatedRemainingSeconds": 11520},
        },
    )
    page = render.jobs_page([job, trainjob("fresh")], "namespace team-a", False, 5, NOW)
    tags = Tags(page)
    assert tags.named("meta")[1] == {"http-equiv": "refresh", "content": "5"}
    assert [a["value"] for a in tags.named("progress")] == ["45"], "one bar: the job without a report has none"
    assert [a["href"] for a in tags.named("a")] == ["/jobs/team-a/trainjobs/digits-a", "/jobs/team-a/trainjobs/fresh"]
    row = re.search(r'<tr class="job" data-name="digits-a">(.*?)</tr>', page, re.S)
    assert row is not None
    cells = [re.sub(r"<[^>]+>", "", c).split() for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)]
    assert cells == [["TrainJob"], ["digits-a"], ["Running"], ["team-q"], ["45%", "45%"], ["3h12m"], ["10m"]]
    assert "<th>Namespace</th>" not in page


def test_the_progress_bar_is_clamped_and_all_namespaces_add_a_column() -> None:
    job = trainjob(status={"trainerStatus": {"progressPercentage": 100}})
    page = render.jobs_page([job], "all namespaces", True, 5, NOW)
    assert [a["value"] for a in Tags(page).named("progress")] == ["100"]
    assert "<th>Namespace</th>" in page and "<td>team-a</td>" in page
    assert render.progress_of(trainjob(status={"trainerStatus": {"progressPercentage": 0}})) == (0, "-")


def test_no_jobs_says_so() -> None:
    page = render.jobs_page([], "namespace team-a", False, 5, NOW)
    assert "No TrainJobs or MPIJobs in namespace team-a." in page
    assert not Tags(page).named("table")


def test_what_a_tenant_writes_is_escaped_everywhere() -> None:
    job = trainjob(
        labels={"kueue.x-k8s.io/queue-name": EVIL},
        status={
            "conditions": [{"type": "Failed", "status": "True", "reason": "Bad", "message": EVIL}],
            "trainerStatus": {
                "metrics": [{"name": EVIL, "value": "1"}],
                "lastCheckpoint": {"path": EVIL, "savedTime": "2026-01-01T00:08:00Z"},
            },
        },
    )
    event = Event(type="Warning", reason=EVIL, message=EVIL, involved_object_kind="Pod", involved_object_name=EVIL)
    pod = {"metadata": {"name": EVIL}, "spec": {"nodeName": EVIL}, "status": {"phase": EVIL}}
    detail = JobDetail(job, [event], [pod], [PodLog(EVIL, EVIL, [EVIL, "ok"]), PodLog("p", "c", [], EVIL)])
    pages = [
        render.job_page(detail, {EVIL: [(0.0, 1.0), (1.0, 2.0)]}, EVIL, 5, NOW, EVIL),
        render.jobs_page([job], EVIL, True, 5, NOW),
        render.error_page(404, EVIL),
    ]
    for page in pages:
        tags = Tags(page)
        assert not tags.named("script") and not tags.named("img"), page
        assert all("onerror" not in attrs for _, attrs in tags.tags)
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert pages[0].count("&lt;script&gt;") >= 10
    assert Tags(pages[0]).named("svg")[0]["data-metric"] == EVIL, "an attribute holds it as text"


def test_a_curve_has_a_point_per_sample_inside_the_plot() -> None:
    points = [(1000.0 + i, float(i % 7)) for i in range(25)]
    c = render.curve("loss", points)
    pairs = [tuple(map(float, p.split(","))) for p in c.points.split()]
    assert c.count == len(pairs) == 25
    assert all(render.LEFT <= x <= render.WIDTH - render.RIGHT for x, _ in pairs)
    assert all(render.TOP <= y <= render.HEIGHT - render.BOTTOM for _, y in pairs)
    assert pairs[0][0] == render.LEFT and pairs[-1][0] == render.WIDTH - render.RIGHT
    assert (c.y_min, c.y_max, c.x_first, c.x_last) == ("0", "6", "00:16:40", "00:17:04")
    flat = render.curve("accuracy", [(5.0, 0.9)])
    middle = (
        render.LEFT + (render.WIDTH - render.LEFT - render.RIGHT) / 2,
        render.TOP + (render.HEIGHT - render.TOP - render.BOTTOM) / 2,
    )
    assert (flat.count, flat.points) == (1, f"{middle[0]:.1f},{middle[1]:.1f}")
    assert render.curve("loss", []).count == 0


def test_the_job_page_draws_one_polyline_per_metric_with_its_points() -> None:
    job = trainjob(status={"conditions": [{"type": "Complete", "status": "True", "reason": "Done"}]})
    series = {"loss": [(float(i), 1 / (i + 1)) for i in range(12)], "accuracy": [(float(i), i / 12) for i in range(3)]}
    page = render.job_page(JobDetail(job), series, "sampled", 5, NOW)
    tags = Tags(page)
    assert [a["data-metric"] for a in tags.named("svg")] == ["accuracy", "loss"]
    assert [len((a["points"] or "").split()) for a in tags.named("polyline")] == [3, 12]
    assert '<td class="state state-Complete">Complete</td>' in page
    for empty in ("No pods.", "No events.", "No pod has started."):
        assert empty in page


def test_a_job_without_metrics_or_status_says_so() -> None:
    page = render.job_page(JobDetail(trainjob()), {}, "sampled", 5, NOW)
    assert "No metrics yet." in page and "No conditions." in page
    assert not Tags(page).named("svg")
    assert '<td class="state state-Created">Created</td>' in page
    assert 'id="checkpoint"' not in page


def test_the_job_page_says_where_the_job_continues_from() -> None:
    saved = {"epoch": 8, "step": 360, "path": "/checkpoints/epoch-8.pt", "savedTime": "2026-01-01T00:08:00Z"}
    job = trainjob(status={"trainerStatus": {"progressPercentage": 40, "lastCheckpoint": saved}})
    page = render.job_page(JobDetail(job), {}, "sampled", 5, NOW)
    text = "epoch 8, step 360 at /checkpoints/epoch-8.pt, saved 2026-01-01T00:08:00Z"
    assert f'<td id="checkpoint">{text}</td>' in page


def test_the_job_page_says_why_a_job_waits_and_what_to_do() -> None:
    waiting = {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "nope:1"'}
    pod = {
        "metadata": {"name": "digits-a-node-0-0-x", "creationTimestamp": "2026-01-01T00:01:00Z"},
        "spec": {"containers": [{"name": "node"}]},
        "status": {"phase": "Pending", "containerStatuses": [{"name": "node", "state": {"waiting": waiting}}]},
    }
    page = render.job_page(JobDetail(trainjob(), pods=[pod]), {}, "sampled", 5, NOW)
    said = "ImagePullBackOff: pod digits-a-node-0-0-x: container node: Back-off pulling image &#34;nope:1&#34;"
    assert f'<td id="why">{said}</td>' in page
    assert "docs/troubleshooting.md#images-that-cannot-be-pulled" in page
    held = trainjob(status={"conditions": [{"type": "WaitingForGang", "status": "True", "reason": "PodGroupPending"}]})
    page = render.job_page(JobDetail(held, pods=[pod]), {}, "sampled", 5, NOW)
    assert '<td id="why">PodGroupPending</td>' in page and "#waitingforgang" in page
    assert 'id="why"' not in render.job_page(JobDetail(trainjob()), {}, "sampled", 5, NOW)


def test_a_finished_job_without_series_shows_its_last_reported_metrics() -> None:
    """A finished job whose curves have no series shows the metrics its trainer last reported (as
    ``describe`` does), not "No metrics yet."; a series, when there is one, is drawn instead."""
    reported = {"metrics": [{"name": "loss", "value": "0.23"}, {"name": "accuracy", "value": "<0.98>"}]}
    job = trainjob(status={"conditions": [{"type": "Complete", "status": "True"}], "trainerStatus": reported})
    page = render.job_page(JobDetail(job), {}, "sampled", 5, NOW)
    assert "No metrics yet." not in page
    table = page.split('<table id="final-metrics">', 1)[1].split("</table>", 1)[0]
    assert "<td>loss</td><td>0.23</td>" in table and "<td>accuracy</td><td>&lt;0.98&gt;</td>" in table
    drawn = render.job_page(JobDetail(job), {"loss": [(1.0, 0.5), (2.0, 0.23)]}, "sampled", 5, NOW)
    assert 'id="final-metrics"' not in drawn and Tags(drawn).named("svg")

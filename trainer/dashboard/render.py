"""The dashboard's HTML: the jobs page and a job's page, rendered by Jinja2 with autoescape on, so every
string from the cluster (names, messages, log lines) is text, never markup. Curves are inline SVG
drawn here (a polyline per metric, its axes labelled); the pages refresh themselves with
``<meta http-equiv="refresh">`` and carry no script.

Pure: data in, HTML out (tests/dashboard/test_render.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

import jinja2

from api.trainer_v1alpha1 import TrainJob
from trainer.client import Event, queue_of
from trainer.client.jobs import job_waiting
from trainer.client.types import checkpoint_text, duration_text, holding_condition, trainer_status_of
from trainer.dashboard.gather import Job, JobDetail
from trainer.framework.clock import parse_time
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta

WIDTH, HEIGHT = 520, 220
"""Size of a curve's SVG, in pixels."""
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 14, 40
"""Margins inside the SVG around the plot: room for the axes' labels."""
SVG = {"width": WIDTH, "height": HEIGHT, "left": LEFT, "right": RIGHT, "top": TOP, "bottom": BOTTOM}
"""The geometry the curves' template reads."""
LOG_LINE_CHARS = 2000
"""Characters of a log line shown at most."""

Point = tuple[float, float]


@dataclass(frozen=True)
class JobRow:
    """A row of the jobs table."""

    namespace: str
    kind: str
    name: str
    href: str
    state: str
    """The condition that holds the job, as ``trainer get``'s STATE (:func:`holding_condition`)."""
    queue: str
    progress: int | None
    """``status.trainerStatus.progressPercentage``, 0 to 100; None before a report (and for an MPIJob)."""
    eta: str
    """``estimatedRemainingSeconds`` as ``3h12m``; ``-`` when not reported."""
    age: str


@dataclass(frozen=True)
class Curve:
    """One metric's curve as drawn: the polyline's ``points`` attribute and the axes' labels."""

    metric: str
    points: str
    """``x,y`` pairs separated by spaces, in SVG pixels."""
    count: int
    y_min: str
    y_max: str
    x_first: str
    """Time of the first point, ``HH:MM:SS`` UTC."""
    x_last: str


def age_of(timestamp: str | None, now: datetime) -> str:
    """How long ago an RFC 3339 timestamp was, as :func:`duration_text` (``45s``, ``3h12m``); ``-``
    without one."""
    then = parse_time(timestamp) if timestamp else None
    return duration_text(int((now - then).total_seconds())) if then else "-"


def job_href(job: Job) -> str:
    """The path of a job's page: ``/jobs/<namespace>/<plural>/<name>``."""
    parts = (job.metadata.namespace or "", job.PLURAL, job.metadata.name or "")
    return "/jobs/" + "/".join(quote(p, safe="") for p in parts)


def progress_of(job: Job) -> tuple[int | None, str]:
    """A TrainJob's reported percent (clamped to 0..100) and ETA text; ``(None, "-")`` without a report."""
    status = trainer_status_of(job) if isinstance(job, TrainJob) else None
    if status is None:
        return None, "-"
    percent = status.progress_percentage
    eta = status.estimated_remaining_seconds
    return (
        None if percent is None else max(0, min(100, int(percent))),
        "-" if eta is None else duration_text(eta),
    )


def job_row(job: Job, now: datetime) -> JobRow:
    """The jobs table's row of ``job``."""
    progress, eta = progress_of(job)
    return JobRow(
        namespace=job.metadata.namespace or "",
        kind=job.kind,
        name=job.metadata.name or "",
        href=job_href(job),
        state=holding_condition(job).state,
        queue=queue_of(job) or "-",
        progress=progress,
        eta=eta,
        age=age_of(job.metadata.creation_timestamp, now),
    )


def _label(value: float) -> str:
    return f"{value:.4g}"


def _clock(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%H:%M:%S")


def curve(metric: str, points: Sequence[Point]) -> Curve:
    """The curve of ``points`` (``(seconds since the epoch, value)``, oldest first) scaled into the
    plot; a flat or one-point curve is drawn across the middle. No points: an empty ``points``."""
    if not points:
        return Curve(metric, "", 0, "-", "-", "-", "-")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    if y1 == y0:
        pad = abs(y0) * 0.1 or 1.0
        y0, y1 = y0 - pad, y1 + pad
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + (plot_w * (t - x0) / (x1 - x0) if x1 > x0 else plot_w / 2)

    def y(v: float) -> float:
        return TOP + plot_h * (1 - (v - y0) / (y1 - y0))

    text = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in points)
    return Curve(metric, text, len(points), _label(y0), _label(y1), _clock(x0), _clock(x1))


def curves(series: Mapping[str, Sequence[Point]]) -> list[Curve]:
    """One :func:`curve` per metric, by metric name."""
    return [curve(name, points) for name, points in sorted(series.items())]


def pod_row(pod: JSON, now: datetime) -> dict[str, str]:
    """NAME, PHASE, NODE, READY, RESTARTS, AGE of a pod."""
    m, spec, status = meta(pod), pod.get("spec") or {}, pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    return {
        "name": str(m.name or ""),
        "phase": str(status.get("phase") or "Pending"),
        "node": str(spec.get("nodeName") or "-"),
        "ready": f"{sum(1 for c in containers if c.get('ready'))}/{len(spec.get('containers') or [])}",
        "restarts": str(sum(int(c.get("restartCount") or 0) for c in containers)),
        "age": age_of(m.creation_timestamp, now),
    }


def event_row(event: Event, now: datetime) -> dict[str, str]:
    """LAST SEEN, TYPE, REASON, OBJECT, MESSAGE of an event."""
    return {
        "age": age_of(event.time, now),
        "type": event.type,
        "reason": event.reason,
        "object": f"{event.involved_object_kind}/{event.involved_object_name}",
        "message": event.message,
    }


BASE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
{% if refresh %}<meta http-equiv="refresh" content="{{ refresh }}">{% endif %}
<title>{{ title }}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { text-align: left; padding: 0.3em 0.8em; border-bottom: 1px solid #ddd; vertical-align: top; }
th { background: #f3f3f3; }
progress { width: 10em; vertical-align: middle; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; max-height: 30em; }
.state-Complete { color: #1a7f37; font-weight: bold; }
.state-Failed { color: #cf222e; font-weight: bold; }
.empty, .note { color: #666; font-style: italic; }
svg.curve { border: 1px solid #ddd; margin: 0 1em 1em 0; background: #fff; }
svg.curve polyline { fill: none; stroke: #0969da; stroke-width: 2; }
svg.curve line { stroke: #888; }
svg.curve text { font-size: 11px; fill: #444; }
</style>
</head>
<body>
{% block body %}{% endblock %}
<p class="note">Read-only.{% if refresh %} Refreshed every {{ refresh }} s.{% endif %} {{ now }}</p>
</body>
</html>
"""

JOBS = """{% extends "base" %}
{% block body %}
<h1>Training jobs in {{ scope }}</h1>
{% if rows %}
<table id="jobs">
<tr>{% if namespaces %}<th>Namespace</th>{% endif %}<th>Kind</th><th>Name</th><th>State</th><th>Queue</th>
<th>Progress</th><th>ETA</th><th>Age</th></tr>
{% for r in rows %}
<tr class="job" data-name="{{ r.name }}">
{% if namespaces %}<td>{{ r.namespace }}</td>{% endif %}
<td>{{ r.kind }}</td>
<td><a href="{{ r.href }}">{{ r.name }}</a></td>
<td class="state state-{{ r.state }}">{{ r.state }}</td>
<td>{{ r.queue }}</td>
<td>{% if r.progress is not none %}<progress max="100" value="{{ r.progress }}">{{ r.progress }}%</progress>
{{ r.progress }}%{% else %}-{% endif %}</td>
<td>{{ r.eta }}</td>
<td>{{ r.age }}</td>
</tr>
{% endfor %}
</table>
{% else %}
<p class="empty">No TrainJobs or MPIJobs in {{ scope }}.</p>
{% endif %}
{% endblock %}
"""

JOB = """{% extends "base" %}
{% block body %}
<p><a href="/">All jobs</a></p>
<h1>{{ row.kind }} {{ row.namespace }}/{{ row.name }}</h1>
<table id="summary">
<tr><th>State</th><td class="state state-{{ row.state }}">{{ row.state }}</td></tr>
{% if why %}
<tr><th>Why</th><td id="why">{{ why.reason }}{% if why.message %}: {{ why.message }}{% endif %}</td></tr>
<tr><th>Next</th><td id="next">{{ why.next_step }} (see {{ why.doc }})</td></tr>
{% elif held.reason or held.message %}
<tr><th>Why</th><td id="why">{{ held.reason }}{% if held.message %}: {{ held.message }}{% endif %}</td></tr>
{% endif %}
<tr><th>Queue</th><td>{{ row.queue }}</td></tr>
<tr><th>Progress</th><td>{% if row.progress is not none %}
<progress max="100" value="{{ row.progress }}">{{ row.progress }}%</progress> {{ row.progress }}%
{% else %}-{% endif %}</td></tr>
<tr><th>ETA</th><td>{{ row.eta }}</td></tr>
{% if checkpoint %}<tr><th>Checkpoint</th><td id="checkpoint">{{ checkpoint }}</td></tr>{% endif %}
<tr><th>Age</th><td>{{ row.age }}</td></tr>
</table>

<h2>Curves</h2>
<p class="note">{{ curves_source }}</p>
{% if curves_error %}<p class="empty">{{ curves_error }}</p>{% endif %}
{% for c in curves %}
<svg class="curve" data-metric="{{ c.metric }}" width="{{ svg.width }}" height="{{ svg.height }}"
 viewBox="0 0 {{ svg.width }} {{ svg.height }}" role="img" aria-label="{{ c.metric }}">
<line x1="{{ svg.left }}" y1="{{ svg.top }}" x2="{{ svg.left }}" y2="{{ svg.height - svg.bottom }}"/>
<line x1="{{ svg.left }}" y1="{{ svg.height - svg.bottom }}"
 x2="{{ svg.width - svg.right }}" y2="{{ svg.height - svg.bottom }}"/>
<text x="{{ svg.left - 6 }}" y="{{ svg.top + 4 }}" text-anchor="end">{{ c.y_max }}</text>
<text x="{{ svg.left - 6 }}" y="{{ svg.height - svg.bottom }}" text-anchor="end">{{ c.y_min }}</text>
<text x="14" y="{{ (svg.top + svg.height - svg.bottom) // 2 }}" text-anchor="middle"
 transform="rotate(-90 14 {{ (svg.top + svg.height - svg.bottom) // 2 }})">{{ c.metric }}</text>
<text x="{{ svg.left }}" y="{{ svg.height - svg.bottom + 14 }}">{{ c.x_first }}</text>
<text x="{{ svg.width - svg.right }}" y="{{ svg.height - svg.bottom + 14 }}" text-anchor="end">{{ c.x_last }}</text>
<text x="{{ (svg.left + svg.width - svg.right) // 2 }}" y="{{ svg.height - 6 }}" text-anchor="middle">
time (UTC), {{ c.count }} points</text>
<polyline points="{{ c.points }}"/>
</svg>
{% else %}
{% if final_metrics %}
<p class="note">No series recorded; the metrics the trainer last reported (status.trainerStatus.metrics):</p>
<table id="final-metrics">
<tr><th>Metric</th><th>Value</th></tr>
{% for name, value in final_metrics %}<tr><td>{{ name }}</td><td>{{ value }}</td></tr>
{% endfor %}
</table>
{% else %}<p class="empty">No metrics yet.</p>{% endif %}
{% endfor %}

<h2>Conditions</h2>
{% if conditions %}
<table id="conditions">
<tr><th>Type</th><th>Status</th><th>Reason</th><th>Message</th><th>Last transition</th></tr>
{% for c in conditions %}
<tr><td>{{ c.type }}</td><td>{{ c.status }}</td><td>{{ c.reason }}</td><td>{{ c.message }}</td>
<td>{{ c.last_transition_time or "-" }}</td></tr>
{% endfor %}
</table>
{% else %}<p class="empty">No conditions.</p>{% endif %}

<h2>Pods</h2>
{% if pods %}
<table id="pods">
<tr><th>Name</th><th>Phase</th><th>Node</th><th>Ready</th><th>Restarts</th><th>Age</th></tr>
{% for p in pods %}
<tr><td>{{ p.name }}</td><td>{{ p.phase }}</td><td>{{ p.node }}</td><td>{{ p.ready }}</td>
<td>{{ p.restarts }}</td><td>{{ p.age }}</td></tr>
{% endfor %}
</table>
{% else %}<p class="empty">No pods.</p>{% endif %}

<h2>Events</h2>
{% if events %}
<table id="events">
<tr><th>Last seen</th><th>Type</th><th>Reason</th><th>Object</th><th>Message</th></tr>
{% for e in events %}
<tr><td>{{ e.age }}</td><td>{{ e.type }}</td><td>{{ e.reason }}</td><td>{{ e.object }}</td><td>{{ e.message }}</td></tr>
{% endfor %}
</table>
{% else %}<p class="empty">No events.</p>{% endif %}

<h2>Logs</h2>
{% for log in logs %}
<h3>{{ log.pod }} ({{ log.container }})</h3>
{% if log.error %}
<p class="empty">{{ log.error }}</p>
{% else %}
<pre class="log">{{ log.lines | join("\n") }}</pre>
{% endif %}
{% else %}<p class="empty">No pod has started.</p>{% endfor %}
{% endblock %}
"""

ERROR = """{% extends "base" %}
{% block body %}
<p><a href="/">All jobs</a></p>
<h1>{{ title }}</h1>
<p class="empty">{{ message }}</p>
{% endblock %}
"""

ENV = jinja2.Environment(
    loader=jinja2.DictLoader({"base": BASE, "jobs": JOBS, "job": JOB, "error": ERROR}),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
"""The templates, every expression HTML-escaped (``autoescape``); an undefined name is an error."""


def _clock_now(now: datetime) -> str:
    return now.strftime("%Y-%m-%d %H:%M:%S UTC")


def jobs_page(jobs: Iterable[Job], scope: str, namespaces: bool, refresh: int, now: datetime) -> str:
    """The jobs page: a row per job (:func:`job_row`), NAMESPACE first with ``namespaces``; ``scope``
    names what is listed (``namespace team-a``, ``all namespaces``)."""
    rows = [job_row(j, now) for j in jobs]
    return ENV.get_template("jobs").render(
        title=f"Training jobs in {scope}",
        rows=rows,
        scope=scope,
        namespaces=namespaces,
        refresh=refresh,
        now=_clock_now(now),
    )


def final_metrics(job: Job) -> list[tuple[str, str]]:
    """``(name, value)`` of the metrics a TrainJob's trainer last reported (``status.trainerStatus
    .metrics``, in its order); empty for an MPIJob or before any report."""
    reported = trainer_status_of(job) if isinstance(job, TrainJob) else None
    return [(m.name, m.value) for m in (reported.metrics if reported else None) or []]


def job_page(
    detail: JobDetail,
    series: Mapping[str, Sequence[Point]],
    curves_source: str,
    refresh: int,
    now: datetime,
    curves_error: str = "",
) -> str:
    """A job's page: its state, why it waits and the next step (:func:`trainer.client.jobs.job_waiting`
    over its pods), progress, curves (one SVG per metric of ``series``; ``curves_source``
    says where they come from, ``curves_error`` why they could not be read; with no series, the
    metrics a TrainJob's trainer last reported, ``status.trainerStatus.metrics``, as ``describe``
    shows them, e.g. a finished job's final loss), conditions, pods, events and last log lines."""
    job = detail.job
    row = job_row(job, now)
    logs = [dataclasses.replace(log, lines=[line[:LOG_LINE_CHARS] for line in log.lines]) for log in detail.logs]
    return ENV.get_template("job").render(
        title=f"{row.kind} {row.namespace}/{row.name}",
        row=row,
        held=holding_condition(job),
        why=job_waiting(job, detail.pods),
        checkpoint=checkpoint_text(job) if isinstance(job, TrainJob) else "",
        curves=curves(series),
        curves_source=curves_source,
        curves_error=curves_error,
        final_metrics=final_metrics(job),
        conditions=list((job.status.conditions if job.status else None) or []),
        pods=[pod_row(p, now) for p in detail.pods],
        events=[event_row(e, now) for e in reversed(detail.events)],
        logs=logs,
        refresh=refresh,
        now=_clock_now(now),
        svg=SVG,
    )


def error_page(status: int, message: str) -> str:
    """A page that says why a request failed (HTTP ``status``), not refreshed."""
    return ENV.get_template("error").render(title=f"Error {status}", message=message, refresh=0, now="")

"""The dashboard's HTML: the jobs page and a job's page, rendered by Jinja2 with autoescape on, so every
string from the cluster (names, messages, log lines) is text, never markup. Curves are inline SVG
drawn here (a polyline per metric, its axes labelled); the pages refresh themselves with
``<meta http-equiv="refresh">`` and carry no script.

An OptimizationJob's page (:func:`optimization_page`) has its state (``Suspended`` while it is held), its
search and early-stopping algorithms, its trials table (trials stopped early apart), the best trial so far,
every trial's objective curve on one plot (one polyline per trial) and the objective per trial index.

Pure: data in, HTML out (tests/dashboard/test_render.py, tests/dashboard/test_optimization.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

import jinja2

from trainer.api.optimizationjob import OptimizationJob
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.client import Event, queue_of
from trainer.client.jobs import job_waiting
from trainer.client.optimize import algorithm_text, best_trial, early_stopping_text, optimization_status
from trainer.client.types import checkpoint_text, duration_text, holding_condition, trainer_status_of
from trainer.dashboard.gather import Job, JobDetail, OptimizationDetail
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


def job_href(job: Job | OptimizationJob) -> str:
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


@dataclass(frozen=True)
class SearchRow:
    """A row of the OptimizationJobs table."""

    namespace: str
    name: str
    href: str
    state: str
    """``Created``, ``Running``, ``Complete`` or ``Failed`` (:func:`trainer.client.optimize.optimization_status`)."""
    objective: str
    """``loss (Minimize)``."""
    trials: str
    """``<created>/<numTrials>``."""
    best: str
    """``<trial> (<metric>=<value>)``; ``-`` before one."""
    age: str


def search_row(job: OptimizationJob, now: datetime) -> SearchRow:
    """The OptimizationJobs table's row of ``job``."""
    o, status = job.spec.objectives[0], job.status
    result = status.result if status else None
    values = {r.name: r.value for r in (status.trial_results if status else None) or []}
    best = "-"
    if result is not None:
        value = values.get(result.train_job_name)
        best = f"{result.train_job_name} ({o.metric}={value})" if value else result.train_job_name
    return SearchRow(
        namespace=job.metadata.namespace or "",
        name=job.metadata.name or "",
        href=job_href(job),
        state=optimization_status(job),
        objective=f"{o.metric} ({o.direction or 'Minimize'})",
        trials=f"{(status.trials if status else None) or 0}/{job.spec.num_trials or 1}",
        best=best,
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


COLORS = ("#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#0a3069", "#e16f24", "#57606a")
"""The polylines' colours of a plot of several lines, in turn."""


@dataclass(frozen=True)
class Line:
    """One line of a :class:`Plot`: its label, SVG points and colour."""

    label: str
    points: str
    color: str
    count: int


@dataclass(frozen=True)
class Plot:
    """Several lines on one pair of axes (one scale), labelled as :class:`Curve`'s."""

    title: str
    lines: list[Line]
    y_min: str
    y_max: str
    x_first: str
    x_last: str
    x_title: str


def plot(
    title: str, series: Mapping[str, Sequence[Point]], x_text: Callable[[float], str], x_title: str
) -> Plot | None:
    """Every line of ``series`` (label -> ``(x, y)`` points, by x) on one plot scaled to them all, each its
    colour (:data:`COLORS`, in turn); ``x_text`` labels the first and last x. None when no line has a point."""
    every = [p for points in series.values() for p in points]
    if not every:
        return None
    x0, x1 = min(p[0] for p in every), max(p[0] for p in every)
    y0, y1 = min(p[1] for p in every), max(p[1] for p in every)
    if y1 == y0:
        pad = abs(y0) * 0.1 or 1.0
        y0, y1 = y0 - pad, y1 + pad
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + (plot_w * (t - x0) / (x1 - x0) if x1 > x0 else plot_w / 2)

    def y(v: float) -> float:
        return TOP + plot_h * (1 - (v - y0) / (y1 - y0))

    lines = [
        Line(label, " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in points), COLORS[i % len(COLORS)], len(points))
        for i, (label, points) in enumerate(series.items())
        if points
    ]
    return Plot(title, lines, _label(y0), _label(y1), x_text(x0), x_text(x1), x_title)


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
.state-Suspended, .state-EarlyStopped { color: #9a6700; }
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
{% if searches %}
<h2>Hyperparameter searches</h2>
<table id="searches">
<tr>{% if namespaces %}<th>Namespace</th>{% endif %}<th>Name</th><th>State</th><th>Objective</th><th>Trials</th>
<th>Best</th><th>Age</th></tr>
{% for r in searches %}
<tr class="search" data-name="{{ r.name }}">
{% if namespaces %}<td>{{ r.namespace }}</td>{% endif %}
<td><a href="{{ r.href }}">{{ r.name }}</a></td>
<td class="state state-{{ r.state }}">{{ r.state }}</td>
<td>{{ r.objective }}</td><td>{{ r.trials }}</td><td>{{ r.best }}</td><td>{{ r.age }}</td>
</tr>
{% endfor %}
</table>
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

PLOT = """<svg class="curve plot" data-plot="{{ p.title }}" width="{{ svg.width }}" height="{{ svg.height }}"
 viewBox="0 0 {{ svg.width }} {{ svg.height }}" role="img" aria-label="{{ p.title }}">
<line x1="{{ svg.left }}" y1="{{ svg.top }}" x2="{{ svg.left }}" y2="{{ svg.height - svg.bottom }}"/>
<line x1="{{ svg.left }}" y1="{{ svg.height - svg.bottom }}"
 x2="{{ svg.width - svg.right }}" y2="{{ svg.height - svg.bottom }}"/>
<text x="{{ svg.left - 6 }}" y="{{ svg.top + 4 }}" text-anchor="end">{{ p.y_max }}</text>
<text x="{{ svg.left - 6 }}" y="{{ svg.height - svg.bottom }}" text-anchor="end">{{ p.y_min }}</text>
<text x="14" y="{{ (svg.top + svg.height - svg.bottom) // 2 }}" text-anchor="middle"
 transform="rotate(-90 14 {{ (svg.top + svg.height - svg.bottom) // 2 }})">{{ metric }}</text>
<text x="{{ svg.left }}" y="{{ svg.height - svg.bottom + 14 }}">{{ p.x_first }}</text>
<text x="{{ svg.width - svg.right }}" y="{{ svg.height - svg.bottom + 14 }}" text-anchor="end">{{ p.x_last }}</text>
<text x="{{ (svg.left + svg.width - svg.right) // 2 }}" y="{{ svg.height - 6 }}" text-anchor="middle">
{{ p.x_title }}</text>
{% for l in p.lines %}
<polyline data-line="{{ l.label }}" points="{{ l.points }}" style="stroke: {{ l.color }}"/>
{% if l.count == 1 %}<circle cx="{{ l.points.split(",")[0] }}" cy="{{ l.points.split(",")[1] }}" r="3"
 style="fill: {{ l.color }}"/>{% endif %}
{% endfor %}
</svg>
{% if p.lines | length > 1 %}<p class="legend">{% for l in p.lines %}
<span style="color: {{ l.color }}">&#9632; {{ l.label }}</span> {% endfor %}</p>{% endif %}
"""

SEARCH = """{% extends "base" %}
{% block body %}
<p><a href="/">All jobs</a></p>
<h1>OptimizationJob {{ row.namespace }}/{{ row.name }}</h1>
<table id="summary">
<tr><th>State</th><td class="state state-{{ row.state }}">{{ row.state }}</td></tr>
<tr><th>Objective</th><td>{{ row.objective }}</td></tr>
<tr><th>Trials</th><td id="counts">{{ row.trials }} created; {{ counts }}</td></tr>
<tr><th>Search</th><td id="algorithm">{{ algorithm }}</td></tr>
<tr><th>Early stopping</th><td id="early-stopping">{{ early_stopping }}</td></tr>
<tr><th>Best so far</th><td id="best">{{ row.best }}</td></tr>
{% if best_parameters %}<tr><th>Best parameters</th><td id="best-parameters">{{ best_parameters }}</td></tr>{% endif %}
<tr><th>Age</th><td>{{ row.age }}</td></tr>
</table>

<h2>Objective curves</h2>
<p class="note">{{ curves_source }}</p>
{% if curves_error %}<p class="empty">{{ curves_error }}</p>{% endif %}
{% if over_time %}{% with p = over_time %}{% include "plot" %}{% endwith %}
{% else %}<p class="empty" id="no-series">No trial's {{ metric }} series yet: the objective per trial index below
is what each trial reported last.</p>{% endif %}
{% if by_index %}{% with p = by_index %}{% include "plot" %}{% endwith %}{% endif %}

<h2>Trials</h2>
{% if trials %}
<table id="trials">
<tr><th>Index</th><th>Name</th><th>State</th><th>Parameters</th><th>{{ metric }}</th></tr>
{% for t in trials %}
<tr class="trial{% if t.best %} best{% endif %}" data-name="{{ t.name }}">
<td>{{ t.index }}</td><td>{% if t.href %}<a href="{{ t.href }}">{{ t.name }}</a>{% else %}{{ t.name }}{% endif %}</td>
<td class="state state-{{ t.state }}">{{ t.state }}{% if t.best %} (best){% endif %}
{% if t.message %}: {{ t.message }}{% endif %}</td>
<td>{{ t.parameters }}</td><td>{{ t.objective }}</td>
</tr>
{% endfor %}
</table>
{% else %}<p class="empty">No trials yet.</p>{% endif %}

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
    loader=jinja2.DictLoader({"base": BASE, "jobs": JOBS, "job": JOB, "plot": PLOT, "search": SEARCH, "error": ERROR}),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
"""The templates, every expression HTML-escaped (``autoescape``); an undefined name is an error."""


def _clock_now(now: datetime) -> str:
    return now.strftime("%Y-%m-%d %H:%M:%S UTC")


def jobs_page(
    jobs: Iterable[Job],
    scope: str,
    namespaces: bool,
    refresh: int,
    now: datetime,
    searches: Iterable[OptimizationJob] = (),
) -> str:
    """The jobs page: a row per job (:func:`job_row`), NAMESPACE first with ``namespaces``; ``scope``
    names what is listed (``namespace team-a``, ``all namespaces``); then the OptimizationJobs
    ``searches`` (:func:`search_row`), each a link to its page, when there are any."""
    rows = [job_row(j, now) for j in jobs]
    return ENV.get_template("jobs").render(
        title=f"Training jobs in {scope}",
        rows=rows,
        searches=[search_row(j, now) for j in searches],
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


def _number(text: str | None) -> float | None:
    """``text`` as a finite number, else None."""
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def optimization_page(
    detail: OptimizationDetail,
    series: Mapping[str, Sequence[Point]],
    curves_source: str,
    refresh: int,
    now: datetime,
    curves_error: str = "",
) -> str:
    """An OptimizationJob's page: its state (``Suspended`` while ``spec.suspend`` holds it), objective, trial
    counts (those stopped early by ``pruneAlgorithm`` apart), search and early-stopping algorithms, the best
    trial so far and its parameters; every trial's objective curve on one plot (``series``: trial name ->
    ``(seconds since the epoch, value)`` points; ``curves_source`` says where they come from,
    ``curves_error`` why they could not be read; without any, a note says so); the objective per trial
    index (each trial's recorded value, else the last it reported); the trials table (index, name linked
    to its TrainJob's page, state, parameters, objective) and the conditions."""
    job, trials = detail.job, detail.trials
    row = search_row(job, now)
    best = best_trial(job, trials)
    status = job.status
    counts = (
        f"{(status.trials_succeeded if status else None) or 0} succeeded, "
        f"{(status.trials_failed if status else None) or 0} failed, "
        f"{(status.trials_early_stopped if status else None) or 0} stopped early, "
        f"{(status.trials_running if status else None) or 0} running"
    )
    metric = job.spec.objectives[0].metric
    # Only the job's own trials: a series of another TrainJob of a trial's name (someone else's, or an
    # earlier job's of the same name) is not drawn.
    by_trial = {t.name: list(series.get(t.name) or []) for t in trials if series.get(t.name)}
    indexed = [(float(t.index), v) for t in trials if t.index >= 0 and (v := _number(t.objective)) is not None]
    namespace = job.metadata.namespace or ""
    rows = [
        {
            "index": t.index if t.index >= 0 else "?",
            "name": t.name,
            "href": "/jobs/" + "/".join(quote(p, safe="") for p in (namespace, "trainjobs", t.name))
            if t.trainjob is not None
            else "",
            "state": t.state,
            "best": best is not None and t.name == best.name,
            "message": t.message,
            "parameters": ", ".join(f"{k}={v}" for k, v in t.parameters.items()) or "-",
            "objective": t.objective or "-",
        }
        for t in trials
    ]
    result = status.result if status else None
    return ENV.get_template("search").render(
        title=f"OptimizationJob {row.namespace}/{row.name}",
        row=row,
        counts=counts,
        algorithm=algorithm_text(job),
        early_stopping=early_stopping_text(job),
        best_parameters=", ".join(f"{p.name}={p.value}" for p in (result.parameters or [])) if result else "",
        metric=metric,
        over_time=plot(f"{metric} over time", by_trial, _clock, "time (UTC), one line per trial"),
        by_index=plot(f"{metric} by trial", {metric: sorted(indexed)}, lambda i: f"trial {i:g}", "trial index"),
        curves_source=curves_source,
        curves_error=curves_error,
        trials=rows,
        conditions=list((status.conditions if status else None) or []),
        refresh=refresh,
        now=_clock_now(now),
        svg=SVG,
    )

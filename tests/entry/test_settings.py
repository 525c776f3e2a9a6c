"""The settings declared once (trainer/wiring/settings.py): each flag's name and environment variable come from its
field, each consumer's options are filled from the fields that feed them, and docs/operating.md lists
exactly the declared flags."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.kube_double import RecordingKube
from trainer.framework.manager import ManagerOptions
from trainer.mpijob.controller import MPIJobOptions
from trainer.statusserver.server import StatusServerSettings
from trainer.trainjob.options import TrainJobOptions
from trainer.webhook.server import WebhookSettings
from trainer.wiring import new_manager
from trainer.wiring.settings import Settings, env_name, flag_name, flags, parse_args, parser

ROOT = Path(__file__).resolve().parents[2]
CONSUMERS = (ManagerOptions, TrainJobOptions, MPIJobOptions, WebhookSettings, StatusServerSettings)


def test_every_field_is_a_flag_read_from_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    names = [flag_name(f) for f, _ in flags()]
    assert names[:3] == ["--kubeconfig", "--namespace", "--max-concurrent-reconciles"]
    assert [a.option_strings[0] for a in parser()._actions[1:]] == names  # --help's order: the declaration's
    for field, flag in flags():
        assert env_name(field) == "TRAINER_" + flag_name(field)[2:].upper().replace("-", "_")
        assert flag.help, f"{flag_name(field)} has no help"
    monkeypatch.setenv("TRAINER_STATUS_WRITE_INTERVAL", "2")
    monkeypatch.setenv("TRAINER_WEBHOOK_REUSE_PORT", "yes")
    monkeypatch.setenv("TRAINER_MAX_CONCURRENT_RECONCILES", "")  # empty: the declared default
    monkeypatch.setenv("TRAINER_WEBHOOK_HOST", "")  # a string's empty value is kept
    s = parse_args([])
    assert (s.status_write_interval, s.webhook_reuse_port, s.max_concurrent_reconciles) == (2.0, True, 16)
    assert s.webhook_host == ""
    assert parse_args(["--status-write-interval=3"]).status_write_interval == 3.0  # the flag wins


def test_each_feed_names_a_field_of_its_consumer() -> None:
    fed: set[tuple[type, str]] = set()
    for field, flag in flags():
        for consumer, target in flag.feeds:
            name = target or field.name
            assert consumer in CONSUMERS
            assert name in {f.name for f in dataclasses.fields(consumer)}, f"{consumer.__name__} has no {name}"
            fed.add((consumer, name))
    assert {n for c, n in fed if c is ManagerOptions} == {
        "namespace",
        "max_concurrent_reconciles",
        "children_batch_seconds",
    }
    assert ("status_coalesce_seconds" in {n for c, n in fed if c is TrainJobOptions}) and (
        "status_coalesce_seconds" in {n for c, n in fed if c is MPIJobOptions}
    ), "the job layer's coalescing is each job controller's option"


def test_the_consumers_options_come_from_the_settings() -> None:
    s = parse_args(
        [
            "--namespace=ns",
            "--max-concurrent-reconciles=7",
            "--status-coalesce-seconds=0",
            "--children-batch-seconds=2",
            "--max-nodes-per-job=9",
            "--trainjob-running-condition",
            "--webhook-port=9443",
            "--webhook-host=127.0.0.1",
            "--webhook-namespace=ops",
            "--webhook-service=svc",
            "--webhook-cert-validity=3600",
            "--webhook-reuse-port",
            "--status-server-port=10443",
            "--status-write-interval=2",
        ]
    )
    assert s.options(ManagerOptions) == ManagerOptions(
        namespace="ns", max_concurrent_reconciles=7, children_batch_seconds=2
    )
    assert s.options(TrainJobOptions) == TrainJobOptions(
        running_condition=True, max_nodes_per_job=9, status_coalesce_seconds=0
    )
    assert s.options(MPIJobOptions) == MPIJobOptions(max_nodes_per_job=9, status_coalesce_seconds=0)
    assert s.webhook == WebhookSettings(
        port=9443, host="127.0.0.1", namespace="ops", service="svc", cert_validity=3600, reuse_port=True
    )
    assert s.status_server == StatusServerSettings(
        port=10443, namespace="ops", service="svc", write_interval=2, cert_validity=3600, reuse_port=True
    )
    assert s.status_server_url == "https://svc.ops.svc:10443"
    assert Settings().webhook is None and Settings().status_server is None and Settings().status_server_url is None
    with pytest.raises(TypeError):
        s.options(MPIJobOptions, injection=None)


def test_operating_md_lists_exactly_the_flags() -> None:
    page = (ROOT / "docs" / "operating.md").read_text()
    paragraph = page[page.index("<!-- flags table:") :].split("<!-- end of flags table")[0]
    listed = set(re.findall(r"`(--[a-z-]+)", paragraph)) - {"--help"}
    declared = {flag_name(f) for f, _ in flags()}
    assert listed == declared, (
        f"docs/operating.md's flag list differs from trainer/wiring/settings.py: {listed ^ declared}"
    )


def flags_rows() -> dict[str, str]:
    """docs/operating.md's flags table: each flag's What cell."""
    page = (ROOT / "docs" / "operating.md").read_text()
    table = page[page.index("<!-- flags table:") :].split("<!-- end of flags table")[0]
    return {m[1]: m[2] for m in re.finditer(r"^\| `(--[a-z-]+)` \| [^|]+ \| [^|]+ \| (.*) \|$", table, re.M)}


def named(values: Sequence[str], text: str) -> set[str]:
    return {v for v in values if re.search(rf"(?<![\w-]){re.escape(v)}(?![\w-])", text)}


def test_each_flags_help_agrees_with_its_values_and_operating_md() -> None:
    """A help that lists a flag's values lists all of them, and operating.md's row says that help and
    every value."""
    rows = flags_rows()
    for field, flag in flags():
        row = rows[flag_name(field)]
        assert flag.help.replace("|", "\\|") in row, f"{flag_name(field)}: operating.md's help differs"
        if flag.choices:
            assert named(flag.choices, flag.help) in (set(), set(flag.choices)), (
                f"{flag_name(field)}'s help names {sorted(named(flag.choices, flag.help))}, "
                f"its values are {list(flag.choices)}"
            )
            assert named(flag.choices, row.split(flag.help)[-1]) == set(flag.choices)


def test_every_list_of_gang_schedulers_in_the_docs_names_all_of_them() -> None:
    """A line of the README, docs/ or the chart's values that sets the gang scheduler and names more
    than one value (``--set gangScheduler=none  # or volcano, kueue``) names every value of the flag
    (the default, none, may go unsaid)."""
    values = next(flag.choices for field, flag in flags() if field.name == "gang_scheduler_name")
    assert values is not None
    pages = [ROOT / "README.md", ROOT / "charts" / "trainer" / "values.yaml", *sorted((ROOT / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        for line in page.read_text().splitlines():
            if re.search(r"gangScheduler[=:]|--gang-scheduler-name=", line) and len(named(values, line)) > 1:
                checked += 1
                assert named(values, line) >= set(values) - {"none"}, f"{page.name}: {line.strip()}"
    assert checked >= 4


def test_mpi_operators_gang_scheduling_flag_sets_the_gang_scheduler() -> None:
    """mpi-operator's ``--gang-scheduling`` (its manifests and scripts add it to the operator's args) sets
    ``--gang-scheduler-name``; a disagreeing pair and a name this operator has no gang for are refused."""
    assert parse_args(["--gang-scheduling=volcano"]).gang_scheduler_name == "volcano"
    assert parse_args(["--gang-scheduler-name=none", "--gang-scheduling=volcano"]).gang_scheduler_name == "volcano"
    got = parse_args(["--gang-scheduling=scheduler-plugins-scheduler"])
    assert got.gang_scheduler_name == "scheduler-plugins"
    assert parse_args(["--gang-scheduler-name=kueue"]).gang_scheduler_name == "kueue"
    assert parse_args(["--gang-scheduling="]).gang_scheduler_name == "none"
    for argv in (["--gang-scheduler-name=kueue", "--gang-scheduling=volcano"], ["--gang-scheduling=yunikorn"]):
        with pytest.raises(SystemExit) as refused:
            parse_args(argv)
        assert refused.value.code == 2


@pytest.mark.parametrize("argv", [[], ["--max-concurrent-reconciles=7"]], ids=["default", "seven"])
def test_events_are_written_as_many_at_once_as_reconciles_run(argv: list[str]) -> None:
    """Each reconcile's status write may queue an Event: with fewer senders than reconcile workers the
    recorder's queue fills in a burst and Events are dropped (a 5,000 burst with 16 workers and 4 senders
    dropped 37 % of them)."""
    settings = parse_args(argv)
    manager = new_manager(RecordingKube(), settings)
    assert manager.events.senders == settings.max_concurrent_reconciles == (7 if argv else 16)
    assert ManagerOptions().max_concurrent_reconciles == Settings().max_concurrent_reconciles

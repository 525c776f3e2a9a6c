"""The operator's command line: the deploy and operate flags, their environment variables, --help, and
the log format (JSON lines, or the console renderer on a terminal)."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
import uvloop

from trainer import main as operator_main
from trainer.wiring.settings import Settings, parse_args


def test_flags_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    a = parse_args([])
    assert (a.metrics_bind_address, a.health_probe_bind_address) == (":8080", ":8081")
    assert (a.leader_elect, a.leader_election_namespace, a.leader_election_id) == (False, None, "trainer-operator")
    assert parse_args(["--leader-elect"]).leader_elect is True
    assert parse_args(["--leader-elect=false"]).leader_elect is False
    monkeypatch.setenv("TRAINER_LEADER_ELECT", "true")
    monkeypatch.setenv("TRAINER_LEADER_ELECTION_NAMESPACE", "ops")
    monkeypatch.setenv("TRAINER_LEADER_ELECTION_ID", "lease")
    monkeypatch.setenv("TRAINER_METRICS_BIND_ADDRESS", "0")
    monkeypatch.setenv("TRAINER_HEALTH_PROBE_BIND_ADDRESS", "127.0.0.1:9")
    a = parse_args([])
    assert (a.leader_elect, a.leader_election_namespace, a.leader_election_id) == (True, "ops", "lease")
    assert (a.metrics_bind_address, a.health_probe_bind_address) == ("0", "127.0.0.1:9")
    assert parse_args(["--leader-elect=0", "--metrics-bind-address", ":1"]).leader_elect is False


def test_help_documents_every_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    text = capsys.readouterr().out
    for flag in (
        "--gang-scheduler-name",
        "--namespace",
        "--metrics-bind-address",
        "--health-probe-bind-address",
        "--leader-elect",
        "--leader-election-namespace",
        "--leader-election-id",
        "--max-concurrent-reconciles",
        "--kubeconfig",
    ):
        assert flag in text
    assert "TRAINER_<FLAG>" in text


def test_runs_on_uvloop_unless_told_the_standard_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def run(settings: Settings) -> int:
        loops.append(asyncio.get_running_loop())
        return 7

    monkeypatch.setattr(operator_main, "run", run)
    assert operator_main.main(["--log-level", "error"]) == 7
    assert operator_main.main(["--event-loop", "asyncio", "--log-level", "error"]) == 7
    monkeypatch.setenv("TRAINER_EVENT_LOOP", "asyncio")
    assert operator_main.main(["--log-level", "error"]) == 7
    assert [isinstance(loop, uvloop.Loop) for loop in loops] == [True, False, False]
    with pytest.raises(SystemExit):
        parse_args(["--event-loop", "trio"])


LOG_ONE_LINE = (
    "import structlog; from trainer.main import configure_logging; configure_logging('auto', 'info');"
    "structlog.contextvars.bind_contextvars(trainjob='ns/name'); structlog.get_logger().info('reconciled')"
)


def test_logs_are_json_lines_off_a_terminal() -> None:
    out = subprocess.run([sys.executable, "-c", LOG_ONE_LINE], capture_output=True, text=True, check=True)
    line = json.loads(out.stderr)
    assert (line["event"], line["trainjob"], line["level"]) == ("reconciled", "ns/name", "info")


def test_a_librarys_standard_logging_line_is_json_too_and_a_pod_looks_for_no_kubeconfig(tmp_path: Path) -> None:
    script = (
        "import asyncio, logging; from trainer.main import configure_logging; configure_logging('json', 'info');"
        "logging.getLogger('aiohttp.client').warning('something %s', 'odd');"
        "logging.getLogger('aiohttp.client').info('below the bar');"
        "from trainer.framework.kube.client import Kube\n"
        "try: asyncio.run(Kube.connect())\n"
        "except Exception as e: print(type(e).__name__)"
    )
    env = {**os.environ, "HOME": str(tmp_path), "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    env.pop("KUBECONFIG", None)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    lines = [json.loads(line) for line in out.stderr.splitlines()]
    assert [(x["event"], x["level"], x["logger"]) for x in lines] == [("something odd", "warning", "aiohttp.client")]
    assert out.stdout.strip() == "ConfigException", "no token file here: the in-cluster config, not a kubeconfig"


def test_logs_are_for_people_on_a_terminal() -> None:
    leader, follower = pty.openpty()
    try:
        subprocess.run([sys.executable, "-c", LOG_ONE_LINE], stderr=follower, check=True)
        text = os.read(leader, 4096).decode()
    finally:
        os.close(leader)
        os.close(follower)
    assert "reconciled" in text and "trainjob" in text
    assert not text.lstrip().startswith("{")

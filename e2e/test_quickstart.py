"""The quick start, read from docs/quickstart.md (the fenced block between its ``<!-- quickstart``
and ``<!-- end of quickstart -->`` markers) and run as written, one bash process, against the
session's cluster.

Run as written: ``helm install`` of ``charts/trainer`` (``replicas=0``, no webhook), ``trainer operator
run`` in the background, ``trainer apply`` of the runtime and the quick start TrainJob, ``trainer wait``
(Complete), ``trainer describe``, ``trainer logs -f``, ``trainer delete``, ``kill %1``. Each command must
exit 0 but ``trainer logs``: on KWOK nodes no kubelet serves logs, and it must then say so in one line.

Substituted, because the session's cluster is not the quick start's and is shared with the suite:

- the install line (``python3 -m venv``, ``pip install``) and ``make binaries``: the suite runs in
  the venv that has the project and the binaries already; the test puts that venv first on PATH;
- ``eval "$(python -m localcluster up ...)"``: the session's cluster (its KUBECONFIG, and kubectl and
  helm on PATH);
- ``helm install``: release ``quickstart`` in namespace ``trainer-quickstart``, not ``trainer`` in
  ``trainer-system``, where the suite's own operator ServiceAccount and RBAC live (the chart would
  refuse to take them over);
- ``/tmp/quickstart``: a temporary directory of the test;
- ``python -m localcluster down``: not run (the session's cluster stays for the other modules).

The module's operator steps aside meanwhile: the quick start runs its own.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import doc_blocks
from e2e.helpers import ROOT
from localcluster.binaries import ensure
from localcluster.operator_process import Operator

pytestmark = [pytest.mark.e2e, pytest.mark.builds("helm")]
QUICKSTART = ROOT / "docs" / "quickstart.md"
RELEASE, NAMESPACE = "quickstart", "trainer-quickstart"
RC = "::quickstart-rc::"


def quickstart_commands(page: str) -> list[str]:
    """The commands of the quick start block of ``page`` (:func:`e2e.doc_blocks.commands`)."""
    return doc_blocks.commands(page, "quickstart")


def substitute(command: str, cluster: Any, tmp: Path) -> str | None:
    """``command`` as the test runs it (see the module docstring); None: not run."""
    if command.startswith("python3 -m venv") or command.startswith("make binaries"):
        return None
    if command.startswith('eval "$(python -m localcluster up'):
        tools = ensure("kubectl", "helm")
        path = ":".join(str(tools[t].parent) for t in ("kubectl", "helm"))
        return f"export KUBECONFIG={cluster.kubeconfig} PATH={path}:$PATH"
    command = command.replace("/tmp/quickstart", str(tmp))
    if command.startswith("helm install "):
        command = command.replace("helm install trainer ", f"helm install {RELEASE} ", 1)
        return command.replace(" -n trainer-system ", f" -n {NAMESPACE} ", 1)
    if command.startswith("kill %1 && python -m localcluster down"):
        return "kill %1"
    return command


def test_the_quick_start_block_is_found_and_complete() -> None:
    commands = quickstart_commands(QUICKSTART.read_text())
    for step in ("helm install", "trainer apply", "trainer wait", "trainer describe", "trainer logs -f"):
        assert any(c.startswith(step) for c in commands), f"the quick start has no {step!r}"
    assert any(c.startswith("trainer delete") for c in commands)
    assert len(commands) <= 30


@pytest.fixture
def helm_env(cluster: Any, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Helm's state under the test's directory; the release and its namespace gone afterwards."""
    home = tmp_path / "helm"
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    helm = str(ensure("helm")["helm"])
    uninstall = [helm, f"--kubeconfig={cluster.kubeconfig}", "uninstall", RELEASE, "-n", NAMESPACE]
    subprocess.run([*uninstall, "--ignore-not-found", "--wait"], env=env, check=False, capture_output=True)
    try:
        yield env
    finally:
        subprocess.run([*uninstall, "--ignore-not-found", "--wait"], env=env, check=False, capture_output=True)
        cluster.run_kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false", check=False)
        cluster.run_kubectl("delete", "trainjob", "quickstart", "-n", "default", "--ignore-not-found", check=False)


def test_the_quick_start_runs_as_written(
    cluster: Any, operator: Operator, helm_env: dict[str, str], tmp_path: Path
) -> None:
    work = tmp_path / "quickstart"
    work.mkdir()
    cluster.run_kubectl(
        "delete", "trainjob", "quickstart", "-n", "default", "--ignore-not-found", "--wait", check=False
    )
    commands = quickstart_commands(QUICKSTART.read_text())
    script = ["set -u", f"export PATH={Path(sys.executable).parent}:$PATH", f"cd {ROOT}"]
    run: list[str] = []
    for command in commands:
        actual = substitute(command, cluster, work)
        if actual is None:
            continue
        run.append(actual)
        script += [f"echo '{RC}begin {len(run) - 1}'", actual, f'echo "{RC}end {len(run) - 1} $?"']
    operator.stop()  # one operator at a time: the quick start starts its own
    proc = subprocess.Popen(
        ["bash", "-c", "\n".join(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=helm_env,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # the background operator, if `kill %1` did not run
        operator.start()
    print(out)
    outputs: dict[int, tuple[int, str]] = {}
    for m in re.finditer(rf"{RC}begin (\d+)\n(.*?){RC}end \1 (\d+)\n", out, re.S):
        outputs[int(m[1])] = (int(m[3]), m[2])
    assert len(outputs) == len(run), f"not every command ran:\n{out}"
    for i, command in enumerate(run):
        rc, text = outputs[i]
        if command.startswith("trainer logs") and rc != 0:
            # KWOK nodes have no kubelet: one line saying so.
            assert rc == 1 and "are unavailable" in text and len(text.strip().splitlines()) == 1, text
            continue
        assert rc == 0, f"{command!r} exited {rc}:\n{text}\n(log: {work / 'operator.log'})"
    wait = next(outputs[i][1] for i, c in enumerate(run) if c.startswith("trainer wait"))
    assert "quickstart Complete" in wait, wait
    describe = next(outputs[i][1] for i, c in enumerate(run) if c.startswith("trainer describe"))
    assert "State:      Complete" in describe and "quickstart-node-0-1-" in describe, describe
    assert cluster.run_kubectl("get", "trainjob", "quickstart", "-n", "default", check=False).returncode != 0

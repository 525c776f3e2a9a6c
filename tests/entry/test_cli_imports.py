"""What ``trainer get`` imports: a kubeconfig that runs no plugin is read without kubernetes_asyncio,
whose import (its whole generated client) cost more CPU than the rest of the command
(``bench/cli_startup.py`` measures it). The command runs as its own process against an HTTP double of
the apiserver and reports the modules it loaded; a kubeconfig with an exec plugin still loads
kubernetes_asyncio, which runs the plugin."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from tests.http_double import HttpDouble, without_proxies, write_kubeconfig

ROOT = Path(__file__).resolve().parent.parent.parent
NOT_FOR_GET = ("kubernetes_asyncio", "trainer.dashboard", "jinja2")
"""Modules ``trainer get`` has no use for, with a kubeconfig that runs no plugin."""

TRAINJOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "tj-1", "namespace": "default", "resourceVersion": "1"},
    "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}},
}


async def apiserver(server: HttpDouble[None], request: web.Request) -> web.StreamResponse:
    """One TrainJob in the TrainJob lists, empty lists for everything else."""
    items = [TRAINJOB] if request.path.endswith("/trainjobs") else []
    return web.json_response({"kind": "List", "metadata": {"resourceVersion": "1"}, "items": items})


async def loaded_by(args: list[str], kubeconfig: str) -> tuple[str, list[str]]:
    """The output of ``trainer ARGS`` run as its own process with ``kubeconfig``, and the modules it
    had loaded when it exited."""
    script = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
        f"sys.argv = ['trainer', *{args!r}]\n"
        "from trainer.cli import app\n"
        "app()\n"
    )
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    modules: list[str] = json.loads(err.decode().splitlines()[-1])
    return out.decode(), modules


@pytest.mark.parametrize("args", [["get", "tj"], ["get", "tj", "-o", "wide"], ["list"]])
async def test_get_with_a_plain_kubeconfig_does_not_import_kubernetes_asyncio(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_proxies(monkeypatch)
    async with HttpDouble(apiserver) as server:
        out, modules = await loaded_by(args, write_kubeconfig(tmp_path, server.url))
    assert "tj-1" in out  # the command did its work: the TrainJob was listed
    assert [m for m in modules if m.startswith(NOT_FOR_GET)] == []
    assert "aiohttp" in modules  # the transport itself is loaded, of course


async def test_get_with_an_exec_plugin_loads_kubernetes_asyncio_which_runs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_proxies(monkeypatch)
    plugin = tmp_path / "plugin"
    credential = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "e"}}
    plugin.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(credential))})\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    async with HttpDouble(apiserver) as server:
        path = Path(write_kubeconfig(tmp_path, server.url))
        doc = yaml.safe_load(path.read_text())
        doc["users"][0]["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin)}}
        path.write_text(yaml.safe_dump(doc))
        out, modules = await loaded_by(["get", "tj"], str(path))
    assert "tj-1" in out
    assert "kubernetes_asyncio" in modules
    assert [r.headers.get("Authorization") for r in server.received] == ["Bearer e"] * len(server.received)

"""SDK scripts end without aiohttp's ``Unclosed client session``/``Unclosed connector`` warnings: each
script below (the README's shape, with and without ``close()``/``with``, and the async client under
``async with``) runs in a subprocess against the apiserver double, lists TrainJobs over a real HTTP
connection that stays open (keep-alive), and exits; its stderr must not say ``Unclosed``."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest
from aiohttp import web

from tests.http_double import HttpDouble, without_proxies, write_kubeconfig
from trainer.client import TrainerClient

SCRIPTS = {
    "never closed (README)": """
from trainer.client import TrainerClient
client = TrainerClient(kubeconfig=KUBECONFIG, namespace="team-a")
print(len(client.list_jobs()))
""",
    "close()": """
from trainer.client import TrainerClient
client = TrainerClient(kubeconfig=KUBECONFIG, namespace="team-a")
print(len(client.list_jobs()))
client.close()
client.close()
""",
    "with": """
from trainer.client import TrainerClient
with TrainerClient(kubeconfig=KUBECONFIG, namespace="team-a") as client:
    print(len(client.list_jobs()))
""",
    "dropped in a function": """
import gc
from trainer.client import TrainerClient
def count():
    return len(TrainerClient(kubeconfig=KUBECONFIG, namespace="team-a").list_jobs())
print(count())
gc.collect()
""",
    "async with": """
import asyncio
from trainer.client import AsyncTrainerClient
async def main():
    async with await AsyncTrainerClient.connect(KUBECONFIG, "team-a") as client:
        print(len(await client.list_jobs()))
asyncio.run(main())
""",
}


async def no_jobs(server: HttpDouble[None], request: web.Request) -> web.StreamResponse:
    return web.json_response({"kind": "TrainJobList", "items": [], "metadata": {"resourceVersion": "1"}})


@pytest.mark.parametrize("script", SCRIPTS.values(), ids=SCRIPTS.keys())
async def test_a_script_ends_without_unclosed_warnings(
    script: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_proxies(monkeypatch)
    async with HttpDouble(no_jobs) as server:
        code = f"KUBECONFIG = {write_kubeconfig(tmp_path, server.url)!r}\n{script}"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-W", "always::ResourceWarning", "-c", code, stdout=-1, stderr=-1
        )
        out, err = await proc.communicate()
    assert (proc.returncode, out.decode()) == (0, "0\n"), err.decode()
    assert "Unclosed" not in err.decode() and "unclosed" not in err.decode(), err.decode()
    assert [r.path for r in server.received] == ["/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs"]


async def test_close_stops_the_loop_thread_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    without_proxies(monkeypatch)
    async with HttpDouble(no_jobs) as server:
        kubeconfig = write_kubeconfig(tmp_path, server.url)
        client = await asyncio.to_thread(TrainerClient, kubeconfig=kubeconfig, namespace="team-a")
        thread = client._thread
        assert thread.is_alive() and thread in threading.enumerate()
        assert await asyncio.to_thread(client.list_jobs) == []
        await asyncio.to_thread(client.close)
        assert not thread.is_alive() and client._loop.is_closed()
        await asyncio.to_thread(client.close)  # again: nothing to do

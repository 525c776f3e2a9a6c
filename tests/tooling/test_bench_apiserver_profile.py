"""bench.apiserver_profile: where the apiserver's CPU went, read from ``go tool pprof -top -cum``, and its
profiles grouped by the window each began in."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.apiserver_profile import PLACES, Profiler, places, window_files
from bench.burst import parse_args

STATUS = PLACES["custom resource status writes"]
CEL = PLACES["  of writes: CEL rules"]
TOP = f"""File: kube-apiserver
Build ID: 0662214328aacf29688ddec3c88978cc674a9b92
Type: cpu
Time: 2026-12-02 15:50:06 UTC
Duration: 20.04s, Total samples = 22.18s (110.67%)
Showing nodes accounting for 22.18s, 100% of 22.18s total
      flat  flat%   sum%        cum   cum%
     0.01s 0.045% 0.045%     21.90s 98.74%  net/http.(*conn).serve
         0     0% 0.045%      6.36s 28.67%  {STATUS}
         0     0% 0.045%      3.17s 14.29%  runtime.gcBgMarkWorker
     0.04s  0.18%  0.23%      910ms  4.10%  {CEL}
         0     0%  0.23%       10ms 0.045%  {STATUS}.func1
"""


def test_places_are_the_cumulative_seconds_of_their_functions_in_seconds_or_milliseconds() -> None:
    got = places(TOP)
    assert got["total"] == 22.18
    assert got["custom resource status writes"] == 6.36
    assert got["  of writes: CEL rules"] == 0.91
    assert got["garbage collection"] == 3.17
    # A place pprof does not list took nothing; a function whose name only starts with a place's is not it.
    assert got["creates"] == 0.0
    assert set(got) == {"total", *PLACES}


def test_text_that_is_not_pprofs_is_refused() -> None:
    with pytest.raises(ValueError, match="Total samples"):
        places("flat flat% sum% cum cum%\n")


def test_profiles_are_grouped_by_the_window_they_began_in_in_the_order_taken(tmp_path: Path) -> None:
    for name in ("child-0.pb.gz", "child-1.pb.gz", "child-10.pb.gz", "status-11.pb.gz", "child-2.pb.gz"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "notes.txt").write_text("not a profile")
    got = window_files(tmp_path)
    assert list(got) == ["child", "status"]
    assert [p.name for p in got["child"]] == ["child-0.pb.gz", "child-1.pb.gz", "child-2.pb.gz", "child-10.pb.gz"]
    assert [p.name for p in got["status"]] == ["status-11.pb.gz"]


def test_the_burst_takes_a_directory_for_the_apiservers_profiles(tmp_path: Path) -> None:
    assert parse_args(["--n", "10"]).apiserver_profile is None
    assert parse_args(["--n", "10", "--apiserver-profile", str(tmp_path)]).apiserver_profile == tmp_path
    # The modes without a burst's windows refuse it rather than ignore it.
    for mode in ("--keep", "--restart"):
        with pytest.raises(SystemExit):
            parse_args(["--n", "10", mode, "--apiserver-profile", str(tmp_path)])


async def test_profiles_of_an_earlier_run_are_deleted_when_the_first_window_begins(tmp_path: Path) -> None:
    class Refused:
        """What the profiles ask of the apiserver: here, a refusal."""

        async def open(self, *args: object, **kwargs: object) -> object:
            raise ConnectionRefusedError("no apiserver")

    (tmp_path / "status-7.pb.gz").write_bytes(b"an earlier run's")
    (tmp_path / "notes.txt").write_text("kept")
    profiler = Profiler(Refused(), tmp_path)  # type: ignore[arg-type]
    profiler.window("child")
    assert not (tmp_path / "status-7.pb.gz").exists()
    assert (tmp_path / "notes.txt").exists()
    await asyncio.sleep(0)  # the profiles' first request, refused
    # What stopped the profiles is raised by stop(), not lost.
    with pytest.raises(ConnectionRefusedError):
        await profiler.stop()

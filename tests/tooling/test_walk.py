"""``python -m bench.walk`` runs: one torch TrainJob goes from its watch event to its Job create and its
status write, and the walk names the files and the call path it took."""

from __future__ import annotations

from bench.walk import walk


async def test_the_walk_follows_one_trainjob_to_its_job_and_its_status() -> None:
    files, paths = await walk()
    assert {"watch event -> queue", "create Job", "status write"} <= paths.keys(), paths.keys()
    for step in ("trainer/jobs/reconcile.py", "trainer/jobs/child_writer.py"):
        assert step in files, files
    status = [frame.split(":")[1] for frame in paths["status write"]]
    assert status[-2:] == ["reconcile", "write"], "the status is written by the one reconcile, through one writer"
    assert [frame.split(":")[0] for frame in paths["create Job"]] == ["trainer/jobs/child_writer.py"] * 2


async def test_the_story_of_a_plain_trainjob_is_at_most_20_files_and_its_plumbing_is_the_framework() -> None:
    """20: the 17 of one module per step, and the attempt in progress (split from the runtime info, so
    each is typed by its source), the pair of both a reconcile passes on, and the event filter (the
    declaration's, out of ``features/``, which now holds only features that own or watch something)."""
    from bench.walk import role_of

    files, _ = await walk()
    story = [f for f in files if role_of(f) == "story"]
    assert len(story) <= 20, f"a plain TrainJob's story spans {len(story)} files: {story}"
    assert "trainer/jobs/reconcile.py" in story and "trainer/trainjob/kind.py" in story
    assert role_of("trainer/jobs/features/own_writes.py") == "feature"
    assert role_of("trainer/framework/merge.py") == "plumbing"

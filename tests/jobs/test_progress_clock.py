"""The clock of the status coalescing: started once per unwritten change, stopped with the write."""

from __future__ import annotations

from trainer.jobs.status_writer import ProgressClock


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_wait_counts_from_the_first_start_until_stopped() -> None:
    t = Clock()
    clock = ProgressClock(t)
    key = ("ns", "a")
    assert clock.start(key) == 100.0
    t.now = 100.4
    assert clock.start(key) == 100.0, "a later change does not restart it"
    t.now = 101.5
    assert clock.waited(key) == 1.5
    assert clock.waited(("ns", "b")) == 0.0, "another job's clock starts when first asked"
    clock.stop(key)
    assert len(clock) == 1
    t.now = 102.0
    assert clock.waited(key) == 0.0, "stopped: the next change starts it anew"
    clock.stop(key)
    clock.stop(key)
    assert len(clock) == 1

"""Detached component processes, tracked through pid files so that another command can stop them.

Each component runs in its own session (so it outlives the command that started it and can be
signalled as a process group), logs to ``<log_dir>/<name>.log`` and has its pid in
``<run_dir>/<name>.pid``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

KILLED_EXIT_WAIT = 30.0
"""Seconds :meth:`Component.stop` waits for a process to be gone after SIGKILL."""


@dataclass(frozen=True)
class Component:
    """One managed process: its name, binary and the directories holding its pid and log."""

    name: str
    binary: Path
    run_dir: Path
    log_dir: Path

    @property
    def pid_file(self) -> Path:
        """The file holding the pid of the running process."""
        return self.run_dir / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        """The file receiving the process' stdout and stderr."""
        return self.log_dir / f"{self.name}.log"

    def pid(self) -> int | None:
        """The pid of the process if it is alive and still runs ``binary``, else ``None``."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _runs(pid, self.binary) else None

    def is_alive(self) -> bool:
        """Whether the process recorded in the pid file is running."""
        return self.pid() is not None

    def start(self, args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> int:
        """Start ``binary args...`` detached, appending to the log file; return its pid."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} starting {self.binary}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                [str(self.binary), *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                cwd=cwd,
                start_new_session=True,
                close_fds=True,
            )
        self.pid_file.write_text(f"{proc.pid}\n")
        # The Popen object is dropped on purpose: the process must outlive this one. A process
        # that is our child and exits is reaped in stop() / _runs() instead.
        return proc.pid

    def stop(self, timeout: float = 5.0) -> None:
        """Send SIGTERM to the process group, then SIGKILL after ``timeout`` seconds, and wait up to
        :data:`KILLED_EXIT_WAIT` seconds for it to be gone (a large process killed on a loaded machine takes
        seconds to tear down). Its sockets may close a moment after: a caller that binds its ports again
        waits for them to be free."""
        pid = self.pid()
        if pid is not None:
            _signal_group(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _runs(pid, self.binary) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _runs(pid, self.binary):
                _signal_group(pid, signal.SIGKILL)
                deadline = time.monotonic() + max(timeout, KILLED_EXIT_WAIT)
                while _runs(pid, self.binary) and time.monotonic() < deadline:
                    time.sleep(0.1)
        self.pid_file.unlink(missing_ok=True)

    def wait_http_ok(self, url: str, timeout: float, interval: float = 0.3) -> None:
        """Poll ``url`` until it answers 200. Raises ``RuntimeError`` (with the log's tail) when the process
        exits first or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.is_alive():
                raise RuntimeError(f"{self.name} exited:\n{self.log_tail()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
            time.sleep(interval)
        raise RuntimeError(f"{self.name}: {url} not answering 200 after {timeout}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the log file (for error messages)."""
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # The process leads its own session and process group (start_new_session=True).
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)


def _reap(pid: int) -> None:
    # If the process is our own exited child, collect it so it does not linger as a zombie.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _runs(pid: int, binary: Path) -> bool:
    """Whether ``pid`` is a live (non-zombie) process executing ``binary``.

    The identity check reads ``/proc/<pid>/exe``, which the kernel sets early in exec: unlike
    ``/proc/<pid>/cmdline`` it is never empty for a process that has just been started.
    """
    _reap(pid)
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:  # gone, a zombie, or not ours to inspect
        return False
    return exe.removesuffix(" (deleted)") == str(binary.resolve())

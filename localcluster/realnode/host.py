"""What real nodes change on the host, recorded before they start and put back after they stop.

A kubelet and the CNI plugins change the machine they run on, outside their own directories:

- sysctls: the kubelet sets ``vm.overcommit_memory``, ``vm.panic_on_oom``, ``kernel.panic``,
  ``kernel.panic_on_oops`` and the root key quotas (its ``protectKernelDefaults: false`` tunables);
  the bridge plugin (``isGateway``) turns ``net.ipv4.ip_forward`` on;
- iptables: the kubelet's chains (``KUBE-IPTABLES-HINT``, ``KUBE-KUBELET-CANARY``, ``KUBE-FIREWALL``
  ...) and the portmap plugin's (``CNI-HOSTPORT-*``), in the filter, nat and mangle tables;
- ``/var/log/containers`` and ``/var/log/pods``: the kubelet's fixed directories of log links.

:func:`record` writes what these are before the first node starts (``<dir>/host-before.json``, kept
while nodes run, so a second start does not record the nodes' own changes); :func:`restore` puts them
back: the sysctls to their values, the chains that did not exist deleted (with the rules jumping to
them), the log directories removed when they did not exist (else only the links into ``dir``).
"""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
import subprocess
from pathlib import Path

SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
)
TABLES = ("filter", "nat", "mangle")
LOG_DIRS = (Path("/var/log/containers"), Path("/var/log/pods"))
STATE_FILE = "host-before.json"


def _sysctls() -> dict[str, str]:
    values = {}
    for name in SYSCTLS:
        with contextlib.suppress(OSError):
            values[name] = (Path("/proc/sys") / name).read_text().strip()
    return values


def chains(table: str) -> list[str]:
    """The chain names of iptables ``table`` (empty when iptables is missing or refuses)."""
    if not shutil.which("iptables"):
        return []
    out = subprocess.run(["iptables", "-w", "-t", table, "-S"], capture_output=True, text=True).stdout
    return [line.split()[1] for line in out.splitlines() if line.startswith(("-N ", "-P "))]


def rules_jumping_to(rules: str, targets: set[str]) -> list[list[str]]:
    """The rules of ``iptables -S`` output ``rules`` in chains outside ``targets`` that jump (``-j``)
    or go (``-g``) to one of ``targets``, each as the words after ``-A`` (what ``-D`` takes)."""
    found = []
    for line in rules.splitlines():
        words = shlex.split(line)
        if len(words) < 2 or words[0] != "-A" or words[1] in targets:
            continue
        if any(words[i - 1] in ("-j", "-g") and words[i] in targets for i in range(1, len(words))):
            found.append(words[1:])
    return found


def record(work: Path) -> None:
    """Write the host's state to ``work/host-before.json`` unless it is there already."""
    path = work / STATE_FILE
    if path.exists():
        return
    work.mkdir(parents=True, exist_ok=True)
    state = {
        "sysctls": _sysctls(),
        "chains": {table: chains(table) for table in TABLES},
        "log_dirs": {str(d): d.exists() for d in LOG_DIRS},
    }
    path.write_text(json.dumps(state, indent=2) + "\n")


def restore(work: Path) -> list[str]:
    """Put back the state :func:`record` wrote (then remove its file); returns what it changed, one
    line each. Does nothing without the file."""
    path = work / STATE_FILE
    if not path.exists():
        return []
    state = json.loads(path.read_text())
    changed: list[str] = []
    for name, value in state["sysctls"].items():
        current = (Path("/proc/sys") / name).read_text().strip()
        if current != value:
            (Path("/proc/sys") / name).write_text(value + "\n")
            changed.append(f"sysctl {name.replace('/', '.')} {current} -> {value}")
    for table in TABLES:
        before = set(state["chains"].get(table, []))
        new = [c for c in chains(table) if c not in before]
        if not new:
            continue
        rules = subprocess.run(["iptables", "-w", "-t", table, "-S"], capture_output=True, text=True).stdout
        for rule in rules_jumping_to(rules, set(new)):
            subprocess.run(["iptables", "-w", "-t", table, "-D", *rule], check=False, capture_output=True)
        for chain in new:
            subprocess.run(["iptables", "-w", "-t", table, "-F", chain], check=False, capture_output=True)
        for chain in new:
            subprocess.run(["iptables", "-w", "-t", table, "-X", chain], check=False, capture_output=True)
        changed.append(f"iptables -t {table}: deleted {', '.join(new)}")
    for name, existed in state["log_dirs"].items():
        directory = Path(name)
        if not directory.exists():
            continue
        if not existed:
            shutil.rmtree(directory, ignore_errors=True)
            changed.append(f"removed {directory}")
            continue
        for link in directory.iterdir():
            if link.is_symlink() and str(link.readlink()).startswith(str(work)):
                link.unlink()
    path.unlink()
    return changed

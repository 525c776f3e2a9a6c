#!/usr/bin/env python3
"""Build a single-layer OCI image archive (oci-layout tar) from local files, no registry, no Docker.

The archive imports with ``ctr -n k8s.io images import FILE`` and is then known to containerd (and
so to the kubelet through CRI) as NAME, because the index carries the ``io.containerd.image.name``
and ``org.opencontainers.image.ref.name`` annotations.

    python3 image.py OUT.tar NAME --file SRC:DEST [--file ...] [--link DEST:TARGET ...]
                     [--entrypoint JSON] [--cmd JSON]

Example (busybox from Debian's busybox-static, as /bin/sh, /bin/echo, ...):
    python3 image.py busybox.tar localhost/realnode/busybox:1 --file /bin/busybox:bin/busybox \
        --busybox-links bin/busybox --cmd '["/bin/sh"]'
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import subprocess
import tarfile
import time


def _tarinfo(name: str, kind: bytes, mode: int, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.linkname = kind, mode, size, link
    info.mtime = 0
    info.uid = info.gid = 0
    return info


def build_layer(files: list[tuple[str, str]], links: list[tuple[str, str]]) -> bytes:
    """An uncompressed layer tar: parent directories, the files (mode kept) and symlinks."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs: set[str] = set()
        for dest in [d for _, d in files] + [d for d, _ in links] + ["tmp/", "etc/", "proc/", "sys/", "dev/"]:
            parts = dest.strip("/").split("/")
            for i in range(1, len(parts) + (1 if dest.endswith("/") else 0)):
                d = "/".join(parts[:i])
                if d and d not in dirs:
                    dirs.add(d)
                    tar.addfile(_tarinfo(d, tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755))
        for src, dest in files:
            with open(src, "rb") as f:
                data = f.read()
            tar.addfile(_tarinfo(dest.strip("/"), tarfile.REGTYPE, 0o755, len(data)), io.BytesIO(data))
        for dest, target in links:
            tar.addfile(_tarinfo(dest.strip("/"), tarfile.SYMTYPE, 0o777, link=target))
    return buf.getvalue()


def build_image(out: str, name: str, layer: bytes, entrypoint: list[str] | None, cmd: list[str] | None) -> None:
    blobs: dict[str, bytes] = {}

    def blob(data: bytes) -> dict[str, object]:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": digest, "size": len(data)}

    compressed = gzip.compress(layer, mtime=0)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(0)),
        "config": {"Env": ["PATH=/bin:/usr/bin:/sbin:/usr/sbin"], "Entrypoint": entrypoint, "Cmd": cmd},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]},
        "history": [{"created_by": "e2e/realnode/image.py"}],
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(json.dumps(config).encode())},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **blob(compressed)}],
    }
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                **blob(json.dumps(manifest).encode()),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name},
            }
        ],
    }
    with tarfile.open(out, "w") as tar:

        def add(path: str, data: bytes) -> None:
            tar.addfile(_tarinfo(path, tarfile.REGTYPE, 0o644, len(data)), io.BytesIO(data))

        add("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        add("index.json", json.dumps(index).encode())
        for digest, data in blobs.items():
            add("blobs/sha256/" + digest.split(":", 1)[1], data)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("name")
    p.add_argument("--file", action="append", default=[], help="SRC:DEST (DEST relative to /)")
    p.add_argument("--link", action="append", default=[], help="DEST:TARGET symlink")
    p.add_argument("--busybox-links", metavar="DEST", help="add a symlink to DEST for every busybox applet")
    p.add_argument("--entrypoint", type=json.loads)
    p.add_argument("--cmd", type=json.loads)
    a = p.parse_args()
    files: list[tuple[str, str]] = [(f.split(":", 1)[0], f.split(":", 1)[1]) for f in a.file]
    links: list[tuple[str, str]] = [(lk.split(":", 1)[0], lk.split(":", 1)[1]) for lk in a.link]
    if a.busybox_links:
        src = next(s for s, d in files if d.strip("/") == a.busybox_links.strip("/"))
        applets = subprocess.run([src, "--list"], capture_output=True, text=True, check=True).stdout.split()
        links += [(f"bin/{x}", "/" + a.busybox_links.strip("/")) for x in applets if x != "busybox"]
    build_image(a.out, a.name, build_layer(files, links), a.entrypoint, a.cmd)
    print(a.out)


if __name__ == "__main__":
    main()

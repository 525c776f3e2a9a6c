"""A single-layer root file system from local files and symlinks, as an uncompressed layer tar (for the
small pause and busybox images; :func:`localcluster.realnode.images.write_oci_archive` makes the image of it)."""

from __future__ import annotations

import io
import tarfile


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

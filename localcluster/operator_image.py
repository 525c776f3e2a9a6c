"""The operator image, built by a real builder from the project's Dockerfile as it stands.

``buildah`` (Debian's package, daemonless) runs ``buildah build`` on the Dockerfile with one change
made from outside, the base image: ``PYTHON_IMAGE`` is a Debian root file system made here with
``debootstrap`` (python3, venv, ``python`` on the PATH, CA certificates; see
:func:`localcluster.realnode.images.debian_image`), since no registry is reached. Every instruction
runs in buildah (``--isolation chroot``, the host's network for pip), and this machine's pip settings
(``/etc/pip.conf`` and the CA bundle it names) are mounted for the build only, never copied into a
layer. The result is pushed to an OCI archive that containerd imports (``ctr images import``) under
the name the chart deploys, ``docker.io/library/trainer-operator:<appVersion>``.

The archive is cached as ``$TRAINER_CACHE/images/operator-<key>.tar``; the key hashes the Dockerfile,
``.dockerignore`` and every file the build context sends, so a change to the code builds anew.

    python -m localcluster.operator_image        # build (or find); print name, archive, seconds
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from localcluster.realnode import images

ROOT = Path(__file__).resolve().parents[1]
REPOSITORY = "trainer-operator"
"""The chart's ``image.repository`` (short name: containerd stores it under ``docker.io/library/``)."""
BASE = images.DebianImage(
    name="localhost/trainer/python:3.11-bookworm",
    stem="python-base",
    suite="bookworm",
    packages=("python3", "python3-venv", "python-is-python3", "ca-certificates"),
)
"""``PYTHON_IMAGE`` for the build: Debian bookworm's Python 3.11, as ``python:3.11-slim-bookworm`` has."""
PIP_CONFIG = Path("/etc/pip.conf")
PACKAGES = ("buildah",)


def _log(message: str) -> None:
    print(f"[operator-image] {message}", file=sys.stderr, flush=True)


def chart_version() -> str:
    """The chart's ``appVersion``: the tag it deploys by default."""
    return str(yaml.safe_load((ROOT / "charts/trainer/Chart.yaml").read_text())["appVersion"])


def reference(tag: str | None = None) -> str:
    """The name containerd gives the image the chart deploys: ``docker.io/library/trainer-operator:<tag>``."""
    return f"docker.io/library/{REPOSITORY}:{tag or chart_version()}"


def context_files() -> list[Path]:
    """The files the build context sends (``.dockerignore``: the lock, the metadata, ``trainer/api/``, ``trainer/``)
    plus the Dockerfile and ``.dockerignore`` themselves, sorted."""
    files = [ROOT / "Dockerfile", ROOT / ".dockerignore", ROOT / "requirements.lock", ROOT / "pyproject.toml"]
    files.append(ROOT / "README.md")
    for package in ("trainer",):
        files += [p for p in (ROOT / package).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return sorted(files)


def context_key() -> str:
    """A hash of :func:`context_files` (paths and contents) and the base image's recipe."""
    digest = hashlib.sha256(json.dumps([BASE.suite, BASE.packages, images.TRAINING_RECIPE]).encode())
    for path in context_files():
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def ensure_buildah() -> None:
    """Install Debian's buildah when it is missing."""
    if shutil.which("buildah"):
        return
    _log("apt-get install buildah")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, stdout=sys.stderr)
    subprocess.run(["apt-get", "install", "-y", "-qq", *PACKAGES], check=True, env=env, stdout=sys.stderr)


def _buildah(*args: str, capture: bool = False) -> str:
    result = subprocess.run(
        ["buildah", *args], check=True, text=True, stdout=subprocess.PIPE if capture else sys.stderr
    )
    return (result.stdout or "").strip()


def pip_mounts() -> list[str]:
    """``--volume`` options giving the build this machine's pip settings, read-only and for the build
    only: ``/etc/pip.conf`` and the CA bundle its ``cert`` names, when they exist."""
    mounts: list[str] = []
    if PIP_CONFIG.is_file():
        mounts.append(f"--volume={PIP_CONFIG}:{PIP_CONFIG}:ro")
        for line in PIP_CONFIG.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "cert" and Path(value.strip()).is_file():
                mounts.append(f"--volume={value.strip()}:{value.strip()}:ro")
    return mounts


def drop_old_dangling(days: float = images.UNUSED_DAYS) -> list[str]:
    """Remove buildah's untagged images (earlier builds' and their cached steps, about 310 MB each) made
    more than ``days`` ago, as :func:`images.drop_unused` does for archives; recent ones stay, so a build
    of a recent tree still finds its cached steps. Returns the ids removed."""
    listed = json.loads(_buildah("images", "--filter=dangling=true", "--json", capture=True) or "[]")
    old = time.time() - days * 86400
    gone = [str(image["id"]) for image in listed if float(image.get("created") or old) < old]
    for image_id in gone:
        subprocess.run(["buildah", "rmi", image_id], check=False, capture_output=True)
    return gone


@dataclass(frozen=True)
class Built:
    """An operator image: its ``name`` (containerd's reference), its OCI ``archive``, the ``seconds`` the
    build took (0 when found in the cache), its ``layers`` and ``size`` in bytes (uncompressed)."""

    name: str
    archive: Path
    seconds: float
    layers: int
    size: int


def operator_image(tag: str | None = None) -> Built:
    """The operator image tagged ``tag`` (default: the chart's appVersion), built when missing (about
    3-5 minutes cold on 2 cores: the base image's debootstrap, then pip). Raises
    ``subprocess.CalledProcessError`` when debootstrap, apt or a build step fails (buildah prints why)."""
    name = reference(tag)
    out = images.images_dir() / f"operator-{context_key()}-{name.rsplit(':', 1)[1]}.tar"
    info = out.with_suffix(".json")
    if out.exists() and info.exists():
        out.touch()  # in use: see images.drop_unused
        facts = json.loads(info.read_text())
        return Built(name, out, 0.0, facts["layers"], facts["size"])
    began = time.monotonic()
    ensure_buildah()
    base_name, base_archive = images.debian_image(BASE)
    # Into buildah's store under the name the build argument gives (a no-op when already there).
    base_id = _buildah("pull", "--quiet", f"oci-archive:{base_archive}", capture=True).splitlines()[-1]
    _buildah("tag", base_id, base_name)
    built_at = time.monotonic()
    local = f"localhost/{REPOSITORY}:{name.rsplit(':', 1)[1]}"
    _buildah(
        "build",
        "--isolation=chroot",
        "--network=host",
        "--pull=never",
        "--layers",
        f"--build-arg=PYTHON_IMAGE={base_name}",
        *pip_mounts(),
        f"--tag={local}",
        f"--file={ROOT / 'Dockerfile'}",
        str(ROOT),
    )
    build_seconds = time.monotonic() - built_at
    inspect = json.loads(_buildah("inspect", "--type=image", local, capture=True))
    layers = len(inspect["OCIv1"]["rootfs"]["diff_ids"])
    tmp = out.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    _buildah("push", "--quiet", local, f"oci-archive:{tmp}:{name}")
    size = tmp.stat().st_size
    tmp.rename(out)
    info.write_text(json.dumps({"layers": layers, "size": size, "build_seconds": round(build_seconds, 1)}))
    images.drop_unused("operator", out)
    drop_old_dangling()
    seconds = time.monotonic() - began
    _log(f"built {name}: {layers} layers, {size >> 20} MiB, buildah build {build_seconds:.0f}s, {seconds:.0f}s in all")
    return Built(name, out, seconds, layers, size)


def main() -> int:
    built = operator_image(sys.argv[1] if len(sys.argv) > 1 else None)
    print(f"{built.name}\t{built.archive}\t{built.seconds:.1f}s\t{built.layers} layers\t{built.size >> 20} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

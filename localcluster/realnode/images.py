"""Container images for real nodes, built from local files and Debian's packages, no registry.

Every image is an OCI-layout archive cached as ``$TRAINER_CACHE/images/<name>-<key>.tar``, where
the key is a hash of everything that goes into it, so it is built once per machine and then only
imported (``ctr -n k8s.io images import``) into each node's containerd:

- :func:`pause_image`: the CRI sandbox image (``localcluster/realnode/pause.go``, built by ``build.sh``).
- :func:`busybox_image`: ``/bin/busybox`` of Debian's busybox-static and one link per applet.
- :func:`training_image`: a Debian root file system made by ``debootstrap`` plus, installed with
  apt inside it, python3, Debian's CPU build of PyTorch (``python3-torch``, with gloo), Open MPI
  with mpi4py and openssh-server. PyPI's ``torch`` wheel for Linux is a CUDA build whose import
  fails without its nvidia-* / cuda-toolkit dependencies (several GB), so Debian's is used.
  Debian ``IMAGE_SUITE`` (bookworm: Open MPI 4, whose launcher is ORTE).
- :func:`torchtune_image`: the same recipe but scikit-learn on Debian ``TORCHTUNE_IMAGE_SUITE`` (trixie:
  python3-torch 2.6, and Open MPI 5, whose launcher is PRRTE and reads ``PRTE_MCA_*`` variables only),
  plus torchtune 0.6.1 with the packages of ``torchtune-wheels.txt``, every one pinned, in a virtual
  environment at :data:`VENV` that sees Debian's packages (``tune`` on its ``PATH``). The wheels are
  downloaded by this machine's pip and installed offline in the chroot (:func:`install_wheels`). One
  image for both (torchtune's tests and the Open MPI 5 tests): one root file system less to make.

Both are :class:`DebianImage` specs built by one function, :func:`debian_image`.

    python -m localcluster.realnode.images [pause|busybox|training|torchtune ...]   # build (or find), print paths
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from localcluster.binaries import cache_dir
from localcluster.realnode.layer import build_layer

HERE = Path(__file__).resolve().parent
BUILD_SCRIPT = HERE / "build.sh"
"""``localcluster/realnode/build.sh``: kubelet, kube-proxy, CoreDNS and pause."""
PAUSE_IMAGE = "localhost/realnode/pause:1"
BUSYBOX_IMAGE = "localhost/realnode/busybox:1"
TRAINING_IMAGE = "localhost/realnode/training:1"
TORCHTUNE_IMAGE = "localhost/realnode/torchtune:1"
TORCHTUNE_WHEELS = HERE / "torchtune-wheels.txt"
VENV = "/opt/venv"
"""Where an image's pinned Python packages live (first on its ``PATH``)."""
WHEEL_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any")
# What the training images hold (Debian package names); part of their cache key.
TRAINING_PACKAGES = (
    "python3",
    "python3-torch",
    "python3-sklearn",
    "python3-mpi4py",
    "openmpi-bin",
    "openssh-server",
    "openssh-client",
    "iproute2",
    "procps",
    "busybox",
)
# torchtune's image's, which is also the Open MPI 5 image: the same without scikit-learn, and venv.
TORCHTUNE_PACKAGES = (*(p for p in TRAINING_PACKAGES if p != "python3-sklearn"), "python3-venv")
# Bump when the recipe below changes in a way that changes the image.
TRAINING_RECIPE = 2


def _log(message: str) -> None:
    print(f"[realnode-images] {message}", file=sys.stderr, flush=True)


def images_dir() -> Path:
    """Where built image archives are cached."""
    return cache_dir() / "images"


def realnode_versions() -> dict[str, str]:
    """The ``NAME=value`` pairs of ``localcluster/realnode/versions.env``."""
    pairs: dict[str, str] = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            name, _, value = line.partition("=")
            pairs[name.strip()] = value.strip().strip("\"'")
    return pairs


def ensure_built(*components: str) -> Path:
    """Run ``localcluster/realnode/build.sh`` for ``components`` (kubelet, coredns, pause); return the bin dir."""
    subprocess.run(["bash", str(BUILD_SCRIPT), *components], check=True, stdout=sys.stderr)
    return cache_dir() / "bin"


# --- OCI archives --------------------------------------------------------------------------------


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def write_oci_archive(out: Path, name: str, layer: Path, config: dict[str, Any]) -> None:
    """Write an OCI-layout archive ``out`` of one uncompressed layer tar ``layer`` (streamed, never
    read into memory) with image ``config`` (the ``config`` object of the OCI image config)."""
    layer_digest = _sha256_file(layer)
    blobs: dict[str, bytes] = {}

    def blob(data: bytes) -> dict[str, Any]:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": digest, "size": len(data)}

    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
        "history": [{"created_by": "localcluster/realnode/images.py"}],
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(json.dumps(image_config).encode())},
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": f"sha256:{layer_digest}",
                "size": layer.stat().st_size,
            }
        ],
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
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as tar:

        def add(path: str, size: int, data: IO[bytes]) -> None:
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = size, 0o644, 0
            tar.addfile(info, data)

        add("oci-layout", 30, io.BytesIO(b'{"imageLayoutVersion":"1.0.0"}'))
        index_data = json.dumps(index).encode()
        add("index.json", len(index_data), io.BytesIO(index_data))
        for digest, data in blobs.items():
            add(f"blobs/sha256/{digest.split(':', 1)[1]}", len(data), io.BytesIO(data))
        with layer.open("rb") as f:
            add(f"blobs/sha256/{layer_digest}", layer.stat().st_size, f)
    tmp.rename(out)


def _blob(tar: tarfile.TarFile, name: str) -> Any:
    member = tar.extractfile(name)
    if member is None:
        raise ValueError(f"{tar.name!r} has no {name}")
    return json.load(member)


def manifest_digest(archive: Path) -> str:
    """The digest of the (first) image manifest of OCI archive ``archive``: what ``ctr images ls`` shows
    for the image imported from it."""
    with tarfile.open(archive) as tar:
        return str(_blob(tar, "index.json")["manifests"][0]["digest"])


def image_config(archive: Path) -> dict[str, Any]:
    """The OCI image configuration (``config``: Entrypoint, User, Env...; ``rootfs``; ``history``) of the
    (first) image in OCI archive ``archive``."""
    with tarfile.open(archive) as tar:
        manifest = _blob(tar, "blobs/sha256/" + manifest_digest(archive).split(":", 1)[1])
        return dict(_blob(tar, "blobs/sha256/" + manifest["config"]["digest"].split(":", 1)[1]))


def _cached(stem: str, key_material: dict[str, Any]) -> Path:
    key = hashlib.sha256(json.dumps(key_material, sort_keys=True).encode()).hexdigest()[:16]
    images_dir().mkdir(parents=True, exist_ok=True)
    return images_dir() / f"{stem}-{key}.tar"


UNUSED_DAYS = 7


def drop_unused(stem: str, keep: Path) -> None:
    """Delete the archives of image ``stem`` other than ``keep`` that no build or start used for
    :data:`UNUSED_DAYS` days (other recipes' archives, 1.3 to 2 GB each). Checkouts of different
    recipes on one machine (branches, worktrees) keep theirs while they use them."""
    old = time.time() - UNUSED_DAYS * 86400
    for archive in images_dir().glob(f"{stem}-*.tar"):
        if archive != keep and archive.stat().st_mtime < old:
            archive.unlink()


def _small_image(out: Path, name: str, layer: bytes, config: dict[str, Any]) -> None:
    """The OCI archive ``out`` of image ``name``: one in-memory ``layer`` and ``config`` (plus PATH)."""
    layer_path = out.with_suffix(".layer")
    layer_path.write_bytes(layer)
    try:
        write_oci_archive(out, name, layer_path, {"Env": ["PATH=/bin:/usr/bin:/sbin:/usr/sbin"], **config})
    finally:
        layer_path.unlink()


def pause_image() -> tuple[str, Path]:
    """The sandbox image (name, archive), built when missing."""
    binary = ensure_built("pause") / "realnode-pause" / "pause"
    out = _cached("pause", {"pause": _sha256_file(binary)})
    if not out.exists():
        _small_image(out, PAUSE_IMAGE, build_layer([(str(binary), "pause")], []), {"Entrypoint": ["/pause"]})
    return PAUSE_IMAGE, out


def binary_image(
    name: str, stem: str, binary: Path, path: str = "manager", workdir: str = "/", user: str = "65532:65532"
) -> tuple[str, Path]:
    """The image ``name`` (name, archive) of one static ``binary`` at ``/<path>``, its entrypoint, run as
    ``user`` in ``workdir``: by default 65532:65532 in ``/``, as a distroless static base runs it (the managers
    of Go projects: Kueue's and JobSet's Dockerfiles copy theirs to ``/manager`` on such a base); Katib's
    Dockerfiles copy theirs into a working directory (``/app``) of an image run as root. Built when
    missing, cached under ``stem``."""
    key: dict[str, Any] = {"name": name, "path": path, "binary": _sha256_file(binary)}
    if (workdir, user) != ("/", "65532:65532"):
        key |= {"workdir": workdir, "user": user}
    out = _cached(stem, key)
    if not out.exists():
        config = {"Entrypoint": [f"/{path}"], "User": user, "WorkingDir": workdir}
        _small_image(out, name, build_layer([(str(binary), path)], []), config)
        drop_unused(stem, out)
    return name, out


def busybox_image() -> tuple[str, Path]:
    """A busybox image (name, archive): Debian's busybox-static, built when missing."""
    busybox = Path("/bin/busybox")
    out = _cached("busybox", {"busybox": _sha256_file(busybox)})
    if not out.exists():
        applets = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True).stdout.split()
        links = [(f"bin/{a}", "/bin/busybox") for a in applets if a != "busybox"]
        _small_image(out, BUSYBOX_IMAGE, build_layer([(str(busybox), "bin/busybox")], links), {"Cmd": ["/bin/sh"]})
    return BUSYBOX_IMAGE, out


# --- the training image ----------------------------------------------------------------------------


def debian_mirror() -> str:
    """The Debian mirror apt on this machine uses (from its sources), for debootstrap."""
    texts = [p.read_text() for p in [Path("/etc/apt/sources.list")] if p.exists()]
    texts += [p.read_text() for p in sorted(Path("/etc/apt/sources.list.d").glob("*")) if p.is_file()]
    for text in texts:
        for line in text.splitlines():
            m = re.match(r"\s*(?:URIs:|deb)\s+(?:\[[^]]*\]\s+)?(\S+)", line)
            if m and "security" not in m.group(1) and m.group(1).startswith(("http://", "https://")):
                return m.group(1).rstrip("/")
    raise RuntimeError("no Debian mirror found in /etc/apt/sources.list{,.d}")


def _run(cmd: list[str], log: IO[str], **kwargs: Any) -> None:
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT, **kwargs)


def build_rootfs(root: Path, suite: str, packages: tuple[str, ...], log: IO[str]) -> None:
    """``debootstrap --variant=minbase`` into ``root``, then ``apt-get install packages`` in a chroot (and
    sshd's settings for MPI when ``openssh-server`` is one of them)."""
    if not shutil.which("debootstrap"):
        _run(
            ["apt-get", "install", "-y", "-qq", "debootstrap"],
            log,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    mirror = debian_mirror()
    _run(["debootstrap", "--variant=minbase", "--components=main", suite, str(root), mirror], log)
    (root / "etc/apt/sources.list").write_text(f"deb {mirror} {suite} main\n")
    shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")
    policy = root / "usr/sbin/policy-rc.d"  # no service starts inside the chroot
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    _run(["chroot", str(root), "apt-get", "update", "-qq"], log, env=env)
    _run(["chroot", str(root), "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages], log, env=env)
    _run(["chroot", str(root), "apt-get", "clean"], log, env=env)
    _patch_torch_std(root)
    policy.unlink()
    for junk in ("var/lib/apt/lists", "var/cache/apt", "usr/share/doc", "usr/share/man", "usr/share/info"):
        shutil.rmtree(root / junk, ignore_errors=True)
        (root / junk).mkdir(parents=True, exist_ok=True)
    (root / "etc/resolv.conf").write_text("")  # the kubelet mounts the pod's own
    if "openssh-server" not in packages:
        return
    (root / "run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege separation directory
    # sshd for MPI: key-only root logins, no DNS lookups of clients, no strict modes (the keys come
    # from a Secret volume whose files the kubelet owns).
    (root / "etc/ssh/sshd_config.d/realnode.conf").write_text(
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\nStrictModes no\n"
    )
    (root / "etc/ssh/ssh_config.d/realnode.conf").write_text(
        "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
    )


def _unmount_under(path: Path) -> None:
    """Unmount whatever a failed debootstrap left mounted under ``path`` (deepest first)."""
    prefix = str(path.resolve()) + "/"
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(prefix)), reverse=True):
        subprocess.run(["umount", "-l", mount], check=False)


def _patch_torch_std(root: Path) -> None:
    """Debian's torch 1.13 under Python 3.11: ``Std.from_str("0")`` looks the value up by iterating
    the IntFlag, which no longer yields the zero member NONE (nor the alias ALL), so it returns None
    and plain ``torchrun`` dies with "'NoneType' object has no attribute 'get'". Convert directly."""
    api = root / "usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/api.py"
    if not api.exists():
        return
    text = api.read_text()
    old = "            v = int(v)\n            for s in Std:\n"
    if old in text:
        new = "            v = int(v)\n            return Std(v)\n            for s in Std:\n"
        api.write_text(text.replace(old, new))


@dataclass(frozen=True)
class DebianImage:
    """A training image made of a Debian root file system: its reference ``name``, the ``stem`` of its
    archive in the cache (``<stem>-<key>.tar``), the Debian ``suite``, the ``packages`` apt installs and
    ``wheels``, a pinned requirements file installed into :data:`VENV` (:func:`install_wheels`)."""

    name: str
    stem: str
    suite: str
    packages: tuple[str, ...]
    wheels: Path | None = None


def install_wheels(root: Path, requirements: Path, log: IO[str]) -> None:
    """Make :data:`VENV` in the chroot ``root`` (``--system-site-packages``: Debian's torch stays the
    torch) and install ``requirements`` (``name==version`` lines) into it without an index: this machine's
    pip downloads each wheel for the chroot's CPython (``--no-deps``: the file lists everything), builds a
    line marked ``# source`` into a wheel, and the chroot's pip installs them offline, resolving as usual,
    so a missing requirement fails the build. Raises ``subprocess.CalledProcessError``."""
    version = subprocess.run(
        ["chroot", str(root), "python3", "-c", "import sys; print('%d%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    binary: list[str] = []
    source: list[str] = []
    for line in requirements.read_text().splitlines():
        requirement, _, comment = line.partition("#")
        if requirement.strip():
            (source if comment.strip() == "source" else binary).append(requirement.strip())
    wheels = root / "tmp" / "wheels"
    wheels.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip"]
    platforms = [arg for p in WHEEL_PLATFORMS for arg in ("--platform", p)]
    abis = ["--abi", f"cp{version}", "--abi", "abi3", "--abi", "none"]
    target = ["--python-version", version, "--implementation", "cp", *abis, *platforms]
    _run([*pip, "download", "-q", "--no-deps", "--only-binary=:all:", *target, "-d", str(wheels), *binary], log)
    if source:
        _run([*pip, "wheel", "-q", "--no-deps", "-w", str(wheels), *source], log)
    shutil.copy(requirements, wheels / "requirements.txt")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "HOME": "/root"}
    _run(["chroot", str(root), "python3", "-m", "venv", "--system-site-packages", VENV], log, env=env)
    install = [f"{VENV}/bin/pip", "install", "-q", "--no-index", "--no-cache-dir", "--find-links", "/tmp/wheels"]
    _run(["chroot", str(root), *install, "-r", "/tmp/wheels/requirements.txt"], log, env=env)
    shutil.rmtree(wheels)


def debian_image(spec: DebianImage, work: Path | None = None) -> tuple[str, Path]:
    """The image of ``spec`` (name, archive), built when missing (about 2-5 minutes, see
    docs/development.md) under ``work`` (default: next to the archive). The archive's key is a hash
    of the suite, the packages and :data:`TRAINING_RECIPE`; archives of the same stem that nothing
    used for a week are removed once the new one is built (:func:`drop_unused`). Raises
    ``subprocess.CalledProcessError`` when debootstrap or apt fails (the build directory and its
    ``build.log`` are kept)."""
    key: dict[str, Any] = {"suite": spec.suite, "packages": spec.packages, "recipe": TRAINING_RECIPE}
    if spec.wheels:
        key["wheels"] = spec.wheels.read_text()
    out = _cached(spec.stem, key)
    if out.exists():
        out.touch()  # in use: see drop_unused
        return spec.name, out
    work = work or images_dir() / f"{out.stem}.build"
    _unmount_under(work)
    shutil.rmtree(work, ignore_errors=True)
    root = work / "rootfs"
    root.mkdir(parents=True)
    began = time.monotonic()
    _log(f"building {out.name} ({spec.name}, Debian {spec.suite}) in {work} (log {work / 'build.log'})")
    with (work / "build.log").open("w") as log:
        build_rootfs(root, spec.suite, spec.packages, log)
        if spec.wheels:
            install_wheels(root, spec.wheels, log)
        layer = work / "layer.tar"
        # dev/ and proc/ stay empty: the runtime mounts them. Numeric owners, as in any layer.
        _run(
            [
                "tar",
                "--numeric-owner",
                "--xattrs",
                "--exclude=./dev/*",
                "--exclude=./proc/*",
                "--exclude=./sys/*",
                "-C",
                str(root),
                "-cf",
                str(layer),
                ".",
            ],
            log,
        )
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        config = {
            "Env": [f"PATH={VENV}/bin:{path}" if spec.wheels else f"PATH={path}", "LANG=C.UTF-8"],
            "Cmd": ["/bin/bash"],
        }
        write_oci_archive(out, spec.name, layer, config)
    # Kept on failure, for its build.log.
    _unmount_under(work)
    shutil.rmtree(work, ignore_errors=True)
    drop_unused(spec.stem, out)
    _log(f"built {out} ({out.stat().st_size >> 20} MiB) in {time.monotonic() - began:.0f}s")
    return spec.name, out


def training_image() -> tuple[str, Path]:
    """The training image on Debian ``IMAGE_SUITE`` (bookworm: Open MPI 4) (name, archive)."""
    suite = realnode_versions().get("IMAGE_SUITE", "bookworm")
    return debian_image(DebianImage(TRAINING_IMAGE, "training", suite, TRAINING_PACKAGES))


def torchtune_image() -> tuple[str, Path]:
    """torchtune's image on Debian ``TORCHTUNE_IMAGE_SUITE`` (trixie: torch 2.6, which torchtune 0.6.1
    needs), which is also the Open MPI 5 image (PRRTE's ``mpirun``) (name, archive). About 1.7 GiB, of
    which 0.45 GiB the virtual environment. Its stem does not start with ``training-``, so a build of
    the training image never removes it."""
    suite = realnode_versions().get("TORCHTUNE_IMAGE_SUITE", "trixie")
    spec = DebianImage(TORCHTUNE_IMAGE, "torchtune", suite, TORCHTUNE_PACKAGES, TORCHTUNE_WHEELS)
    return debian_image(spec)


BUILDERS = {
    "pause": pause_image,
    "busybox": busybox_image,
    "training": training_image,
    "torchtune": torchtune_image,
}


def main() -> int:
    for name in sys.argv[1:] or list(BUILDERS):
        began = time.monotonic()
        image, path = BUILDERS[name]()
        print(f"{image}\t{path}\t{time.monotonic() - began:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

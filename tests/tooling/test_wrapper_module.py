"""``wrapper_module`` and ``wrapper_build`` of ``localcluster/build.sh``: a module's command built through
a wrapper module, on its own dependency versions or on another wrapper's (``FLOORS``), with the real Go
toolchain against a module proxy in a directory (``GOPROXY=file://``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "localcluster" / "build.sh"

pytestmark = pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain (localcluster/build.sh)")


def publish(proxy: Path, module: str, version: str, files: dict[str, str], requires: dict[str, str]) -> None:
    """Put ``module@version`` in the proxy directory ``proxy`` (the GOPROXY protocol's files)."""
    gomod = f"module {module}\n\ngo 1.22\n" + "".join(f"\nrequire {m} {v}\n" for m, v in requires.items())
    at = proxy / module / "@v"
    at.mkdir(parents=True, exist_ok=True)
    (at / f"{version}.mod").write_text(gomod)
    (at / f"{version}.info").write_text(json.dumps({"Version": version, "Time": "2026-01-01T00:00:00Z"}))
    with zipfile.ZipFile(at / f"{version}.zip", "w") as z:
        z.writestr(f"{module}@{version}/go.mod", gomod)
        for name, text in files.items():
            z.writestr(f"{module}@{version}/{name}", text)
    with (at / "list").open("a") as listed:
        listed.write(version + "\n")


def command(dep_call: str) -> dict[str, str]:
    """A main package that prints what ``dep_call`` returns (``example.com/dep``)."""
    return {"main.go": f'package main\n\nimport "example.com/dep"\n\nfunc main() {{ println({dep_call}) }}\n'}


@pytest.fixture
def proxy(tmp_path: Path) -> Path:
    """``example.com/dep`` v1.0.0 and v1.1.0 (which drops ``Old``); ``app`` on dep v1.1.0; ``tool`` and
    ``oldtool`` (which calls ``Old``) on dep v1.0.0."""
    proxy = tmp_path / "proxy"
    publish(
        proxy,
        "example.com/dep",
        "v1.0.0",
        {"dep.go": 'package dep\n\nfunc V() string { return "1.0.0" }\n\nfunc Old() string { return "old" }\n'},
        {},
    )
    publish(proxy, "example.com/dep", "v1.1.0", {"dep.go": 'package dep\n\nfunc V() string { return "1.1.0" }\n'}, {})
    publish(proxy, "example.com/app", "v1.0.0", command("dep.V()"), {"example.com/dep": "v1.1.0"})
    publish(proxy, "example.com/tool", "v1.0.0", command("dep.V()"), {"example.com/dep": "v1.0.0"})
    publish(proxy, "example.com/oldtool", "v1.0.0", command("dep.Old() + dep.V()"), {"example.com/dep": "v1.0.0"})
    return proxy


def build(tmp_path: Path, proxy: Path, *builds: str) -> subprocess.CompletedProcess[str]:
    """With ``build.sh`` sourced (:func:`sourced`), build ``app`` into ``tmp_path/out/app`` (wrapper
    ``tmp_path/w/app``), then run ``wrapper_build`` with each of ``builds`` (its arguments, ``{w}`` and
    ``{out}`` standing for those directories)."""
    w, out = tmp_path / "w", tmp_path / "out"
    return sourced(
        tmp_path,
        proxy,
        f"mkdir -p {out}",
        f"wrapper_build {w}/app example.com/app v1.0.0 example.com/app {out}/app",
        *(f"wrapper_build {b.format(w=w, out=out)}" for b in builds),
    )


def printed(binary: Path) -> str:
    """What ``binary`` prints (``println`` writes to stderr)."""
    return subprocess.run([str(binary)], capture_output=True, text=True, check=True).stderr.strip()


def test_a_build_on_floors_takes_the_higher_version_of_each_module_both_use(tmp_path: Path, proxy: Path) -> None:
    done = build(
        tmp_path,
        proxy,
        "{w}/tool example.com/tool v1.0.0 example.com/tool {out}/tool {w}/app",
        "{w}/own example.com/tool v1.0.0 example.com/tool {out}/own",
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    assert printed(out / "app") == "1.1.0"
    assert printed(out / "tool") == "1.1.0", "built on its own versions, not app's"
    assert printed(out / "own") == "1.0.0", "without floors a command keeps its own versions"
    assert "example.com/tool v1.0.0: building tool on the versions of app" in done.stderr
    assert "example.com/dep v1.1.0" in (tmp_path / "w" / "tool" / "go.mod").read_text()


def test_a_command_that_does_not_build_on_the_floors_is_built_on_its_own_versions(tmp_path: Path, proxy: Path) -> None:
    done = build(tmp_path, proxy, "{w}/old example.com/oldtool v1.0.0 example.com/oldtool {out}/old {w}/app")
    assert done.returncode == 0, done.stderr
    assert "example.com/oldtool v1.0.0: does not build on the versions of" in done.stderr
    assert printed(tmp_path / "out" / "old") == "old1.0.0"


def test_a_command_that_does_not_build_at_all_fails_the_build(tmp_path: Path, proxy: Path) -> None:
    publish(proxy, "example.com/broken", "v1.0.0", command("dep.Missing()"), {"example.com/dep": "v1.0.0"})
    done = build(tmp_path, proxy, "{w}/broken example.com/broken v1.0.0 example.com/broken {out}/broken")
    assert done.returncode != 0 and "undefined: dep.Missing" in done.stderr, done
    assert not (tmp_path / "out" / "broken").exists()


def sourced(tmp_path: Path, proxy: Path, *lines: str) -> subprocess.CompletedProcess[str]:
    """Run ``lines`` in bash with ``build.sh`` sourced (caches in ``tmp_path``, modules from ``proxy``)."""
    env = {
        **os.environ,
        "TRAINER_CACHE": str(tmp_path / "cache"),
        "GOMODCACHE": str(tmp_path / "gomod"),
        "GOPROXY": f"file://{proxy}",
        "GOSUMDB": "off",
        "GOFLAGS": "",
    }
    done = subprocess.run(
        ["bash", "-c", "\n".join([f"source {BUILD}", *lines])],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    subprocess.run(["chmod", "-R", "u+w", str(tmp_path / "gomod")], check=False)
    return done


def module(directory: Path, gomod: str, files: dict[str, str] | None = None) -> Path:
    """A module in ``directory``: its go.mod text and files."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "go.mod").write_text(gomod)
    for name, text in (files or {}).items():
        (directory / name).write_text(text)
    return directory


def test_raise_to_requires_a_replaced_version_and_never_moves_a_component(tmp_path: Path, proxy: Path) -> None:
    publish(proxy, "sigs.k8s.io/kueue", "v0.1.0", {"k.go": "package kueue\n"}, {})
    publish(proxy, "sigs.k8s.io/kueue", "v0.2.0", {"k.go": "package kueue\n"}, {})
    floors = module(
        tmp_path / "floors",
        "module local/floors\n\ngo 1.22\n\nrequire (\n\texample.com/dep v1.0.0\n\tsigs.k8s.io/kueue v0.2.0\n)\n\n"
        "replace example.com/dep => example.com/dep v1.1.0\n",
    )
    target = module(
        tmp_path / "target",
        "module local/target\n\ngo 1.22\n\nrequire (\n\texample.com/dep v1.0.0\n\tsigs.k8s.io/kueue v0.1.0\n)\n",
    )
    done = sourced(tmp_path, proxy, f"raise_to {floors} {target}")
    assert done.returncode == 0, done.stderr
    gomod = (target / "go.mod").read_text()
    assert "example.com/dep v1.1.0" in gomod, "the version the floors' replacement selects"
    assert "sigs.k8s.io/kueue v0.1.0" in gomod and "v0.2.0" not in gomod, "a component keeps its own version"


def test_on_build_list_builds_on_the_modules_own_versions_when_raised_it_does_not(tmp_path: Path, proxy: Path) -> None:
    floors = module(tmp_path / "floors", "module local/floors\n\ngo 1.22\n\nrequire example.com/dep v1.1.0\n")
    old = module(
        tmp_path / "old",
        "module local/old\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n",
        {"main.go": 'package main\n\nimport "example.com/dep"\n\nfunc main() { println(dep.Old()) }\n'},
    )
    new = module(
        tmp_path / "new",
        "module local/new\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n",
        {"main.go": 'package main\n\nimport "example.com/dep"\n\nfunc main() { println(dep.V()) }\n'},
    )
    out = tmp_path / "out"
    done = sourced(
        tmp_path,
        proxy,
        f"list_module() {{ echo {floors}; }}",
        f"on_build_list {old} test tidy_then go build -o {out}/old .",
        f"on_build_list {new} test tidy_then go build -o {out}/new .",
    )
    assert done.returncode == 0, done.stderr
    assert "old: does not build on the test build list; building on its own versions" in done.stderr
    assert printed(out / "old") == "old"
    assert "example.com/dep v1.0.0" in (old / "go.mod").read_text(), "its own go.mod put back"
    assert printed(out / "new") == "1.1.0", "built on the build list"
    assert not (new / "go.mod.own").exists()

"""localcluster.prebuild builds everything the suite's modules would otherwise build on first use."""

from __future__ import annotations

import re
from pathlib import Path

from localcluster import prebuild
from localcluster.realnode import images

ROOT = Path(__file__).resolve().parents[2]


def functions(script: Path) -> set[str]:
    """The components a build script knows: its ``build_<name>()`` functions."""
    return set(re.findall(r"^build_(\w+)\(\) \{", script.read_text(), re.MULTILINE))


def test_every_component_of_both_build_scripts_is_prebuilt() -> None:
    assert set(prebuild.COMPONENTS) == functions(ROOT / "localcluster" / "build.sh")
    assert set(prebuild.NODE_BINARIES) == functions(ROOT / "localcluster" / "realnode" / "build.sh") - {
        "node_command"  # the helper of kubelet and kube_proxy
    }


def test_every_real_node_image_but_the_sandbox_is_prebuilt_in_the_image_lane() -> None:
    """The sandbox image wraps the pause binary of the Go lane: the real nodes make it when they start."""
    assert set(prebuild.IMAGES) == set(images.BUILDERS) - {"pause"}

"""The README's first screen (up to the end of "Install on an existing cluster") holds as written: every
``make X`` is a target of the Makefile, every linked or named path exists (and every ``#anchor`` is a
heading of the page it points to), every ``helm install`` names the chart's directory and ``--set``s
only keys of ``charts/trainer/values.yaml``, and every measured figure it quotes is in
docs/benchmarks.md."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
import yaml

from trainer.render.docs_tables import leaves

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SECTIONS = ["Why switch", "Try it", "Install on an existing cluster"]


def first_screen() -> str:
    text = README.read_text()
    headings = [m for m in re.finditer(r"^## (.+)$", text, re.M)]
    assert [h[1] for h in headings[: len(SECTIONS)]] == SECTIONS, [h[1] for h in headings]
    end = headings[len(SECTIONS)].start() if len(headings) > len(SECTIONS) else len(text)
    return text[:end]


def code_lines(text: str) -> list[str]:
    """The lines of the fenced blocks, continuation lines joined."""
    out: list[str] = []
    for block in re.findall(r"^```\w*\n(.*?)^```$", text, re.M | re.S):
        out += block.replace("\\\n", " ").splitlines()
    return out


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))


def slug(heading: str) -> str:
    """A heading's anchor, as Python-Markdown's ``toc`` (MkDocs) and GitHub make it for these pages."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def test_the_first_screen_is_what_why_try_and_install() -> None:
    screen = first_screen()
    assert screen.startswith("# trainer\n")
    assert len(screen.splitlines()) <= 70, "the first screen has grown: move details to docs/"


def test_every_make_target_exists() -> None:
    named = set(re.findall(r"\bmake (\w[\w-]*)", first_screen()))
    assert {"demo", "test", "release"} <= named
    assert sorted(named - makefile_targets()) == []


def test_every_link_and_named_path_exists() -> None:
    screen = first_screen()
    links = [t for t in re.findall(r"\]\(([^)\s]+)\)", screen) if not re.match(r"\w+://", t)]
    assert links, "no link found"
    for target in links:
        path, _, anchor = target.partition("#")
        assert (ROOT / path).exists(), target
        if anchor:
            headings = re.findall(r"^#+ (.+)$", (ROOT / path).read_text(), re.M)
            assert anchor in {slug(h) for h in headings}, f"{target}: no such heading"
    for token in re.findall(r"`([\w.-]+(?:/[\w.-]+)+/?)`", screen):
        assert (ROOT / token).exists(), token


def test_every_helm_install_uses_the_chart_and_its_values() -> None:
    values = yaml.safe_load((ROOT / "charts" / "trainer" / "values.yaml").read_text())
    keys = {
        k
        for leaf, _ in leaves(values)
        for k in (".".join(leaf.split(".")[: i + 1]) for i in range(leaf.count(".") + 1))
    }
    installs = [line for line in code_lines(first_screen()) if line.startswith("helm install ")]
    assert installs, "no helm install"
    for line in installs:
        assert (ROOT / line.split()[3]).is_dir(), line  # helm install NAME CHART
        for key in re.findall(r"--set[= ]([\w.]+)=", line):
            assert key in keys, f"--set {key}: not in charts/trainer/values.yaml"


def test_every_figure_quoted_is_measured_in_the_benchmarks() -> None:
    why = first_screen().split("## Why switch", 1)[1].split("## ", 1)[0]
    figures = re.findall(r"\b\d[\d,]*\.\d+\b", why)
    assert len(figures) >= 8, figures
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text()
    assert sorted(f for f in figures if f not in benchmarks) == []


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Restart on a full cluster", "restart-on-a-full-cluster"),
        ("One 1,000-node TrainJob on Volcano", "one-1000-node-trainjob-on-volcano"),
    ],
)
def test_slug(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_the_restart_figure_is_the_latest_measured() -> None:
    """The README's restart seconds are the last run of docs/benchmarks.md's restart section (its runs are
    listed oldest first), not an older one."""
    why = first_screen().split("## Why switch", 1)[1].split("## ", 1)[0]
    quoted = re.search(r"restart on a full cluster.*?reconciled in ([\d.]+) s", why, re.S | re.I)
    assert quoted, "no restart figure in the README"
    section = (ROOT / "docs" / "benchmarks.md").read_text().split("### Restart on a full cluster", 1)[1]
    section = section.split("\n### ", 1)[0]
    runs = re.findall(r"(?:queue empty|\| seconds to the empty queue[^|]*\|)\s*\**([\d.]+)", section)
    assert runs, "no restart run in docs/benchmarks.md"
    assert quoted[1] == runs[-1], f"README quotes {quoted[1]} s, the latest run took {runs[-1]} s"

"""The generated tables of docs/operating.md (:mod:`trainer.render.docs_tables`) are current: the support matrix
follows ``localcluster/versions.env``, the flags table :mod:`trainer.wiring.settings`, the values table
``charts/trainer/values.yaml``. A stale one: run ``python -m trainer.render.docs_tables``."""

from __future__ import annotations

import pytest
import yaml

from trainer.render import docs_tables
from trainer.wiring import settings


@pytest.mark.parametrize("table", docs_tables.TABLES, ids=lambda t: t.name)
def test_the_table_is_current(table: docs_tables.Table) -> None:
    page = table.page.read_text()
    where = table.page.relative_to(docs_tables.ROOT)
    assert table.block() in page, f"{where}'s {table.name} is stale: run `{docs_tables.COMMAND}`"


def test_the_module_map_has_a_line_per_module_and_refuses_one_without_a_docstring() -> None:
    table = docs_tables.modules_table()
    kind = "| `trainer/trainjob/kind.py` | The TrainJob kind, as plain functions one per step of the shared reconcile"
    assert kind in table
    assert "`trainer/trainjob/features/ttl.py`" in table and "`trainer/api/kinds.py`" in table
    assert docs_tables.first_sentence("One thing: and more.\n\nNext.") == "One thing"
    assert docs_tables.first_sentence("A ``b`` (c; :mod:`~d.e`). More.") == "A `b` (c; `d.e`)"


def test_check_mode_agrees() -> None:
    assert docs_tables.main(["--check"]) == 0


def test_the_matrix_names_every_pinned_component_of_the_suite() -> None:
    pinned = docs_tables.versions()
    table = docs_tables.support_table()
    for name in ("KUBERNETES_VERSION", "KUEUE_VERSION", "VOLCANO_VERSION", "JOBSET_VERSION", "HELM_VERSION"):
        assert f"| {pinned[name]} |" in table, name
    assert "| scheduler-plugins | not run |" in table  # no version in versions.env: say so
    assert f"| Python | {docs_tables.python_versions()[1]} |" in table


def test_every_flag_and_every_value_has_a_row() -> None:
    flags = docs_tables.flags_table()
    for field, _ in settings.flags():
        assert f"| `{settings.flag_name(field)}` | `{settings.env_name(field)}` |" in flags
    values = docs_tables.values_table()
    for key, _ in docs_tables.leaves(yaml.safe_load(docs_tables.VALUES.read_text())):
        assert f"| `{key}` |" in values
    assert "`resources.limits.memory`" in values and "`image.tag`" in values


def test_value_comments_are_read_per_key() -> None:
    text = "# top\n\n# a's\na:\n  # b's\n  b: 1\n  c: 2\n# d's\nd: []\n"
    assert docs_tables.value_comments(text) == {"a": "a's", "a.b": "b's", "d": "d's"}
    assert list(docs_tables.leaves(yaml.safe_load(text))) == [("a.b", 1), ("a.c", 2), ("d", [])]

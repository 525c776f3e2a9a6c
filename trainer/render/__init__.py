"""The files rendered from the code's own declarations, each with ``--check`` (exit 1 when one is stale):
:mod:`trainer.render.rbac` (the RBAC, the webhook configurations and the RBAC table of the docs) and
:mod:`trainer.render.docs_tables` (the docs' other generated tables)."""

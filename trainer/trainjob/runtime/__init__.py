"""A TrainJob on its runtime: which runtime (:mod:`.snapshot`), its shape (:mod:`.shape`), its pod
templates (:mod:`.pod_template`) under its ML policy (:mod:`.policies`), all gathered once per
reconcile in a :class:`~trainer.trainjob.runtime.info.RuntimeInfo` by
:func:`~trainer.trainjob.runtime.expand.runtime_info` (:mod:`.expand`). The package itself imports
nothing: the ML policies read its :mod:`.info` and :mod:`.shape`, and :mod:`.expand` reads the policies.

Mirrors kubeflow/trainer ``pkg/runtime`` (``runtime.go``'s ``Info``, ``core/trainingruntime.go`` and
``framework/plugins``).
"""

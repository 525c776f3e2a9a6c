"""A TrainJob on its runtime, derived once per reconcile: what the runtime says (:mod:`.info`), the pod
templates under its ML policy (:mod:`.pod_template`), what its Jobs are doing (:mod:`.attempt`) and both
together (:mod:`.view`), made by :mod:`.expand`. The package itself imports nothing.

Mirrors kubeflow/trainer ``pkg/runtime`` (``runtime.go``'s ``Info``, ``core/trainingruntime.go`` and
``framework/plugins``).
"""

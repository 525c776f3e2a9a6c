"""Tests of the project's tooling rather than the operator: benchmarks, the image recipe, the Helm chart, and
the generated CRDs and RBAC."""

"""Label and annotation keys the operator reads and writes on jobs and their children.

The JobSet keys (kubernetes-sigs/jobset ``api/jobset/v1alpha2/jobset_types.go``, ``pkg/constants``) are
kept because tools, Kueue and the kubeflow SDK select pods on them although no JobSet object exists.
The MPIJob keys are kubeflow/mpi-operator's (``pkg/controller/mpi_job_controller.go``). The queue keys
are Kueue's (kubernetes-sigs/kueue ``pkg/controller/constants``) and Volcano's (volcano-sh/apis
``pkg/apis/scheduling/v1beta1/labels.go``).
"""

from __future__ import annotations

# JobSet's, on the Jobs and Pods of a TrainJob.
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
REPLICATED_JOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOB_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
JOB_RESTART_ATTEMPT = "jobset.sigs.k8s.io/job-restart-attempt"
"""How many times the Job of this index was recreated alone (JobSet ``pkg/constants``), on the Jobs and
Pods of a runtime with a ``RestartJob`` or ``RestartJobAndIgnoreMaxRestarts`` rule."""
JOBSET_UID = "jobset.sigs.k8s.io/jobset-uid"
GLOBAL_REPLICAS = "jobset.sigs.k8s.io/global-replicas"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
GROUP_NAME = "jobset.sigs.k8s.io/group-name"
GROUP_REPLICAS = "jobset.sigs.k8s.io/group-replicas"
JOB_GROUP_INDEX = "jobset.sigs.k8s.io/job-group-index"
COORDINATOR = "jobset.sigs.k8s.io/coordinator"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
"""Annotation: the node label key of the domains that take one Job each (JobSet ``ExclusiveKey``)."""
NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"
"""Annotation beside ``EXCLUSIVE_TOPOLOGY``: place by node labels, not pod affinities (``NodeSelectorStrategyKey``)."""
NAMESPACED_JOB = "alpha.jobset.sigs.k8s.io/namespaced-job"
"""Node label the node-selector strategy selects: ``<namespace>_<job name>`` (``NamespacedJobKey``)."""
NO_SCHEDULE_TAINT = "alpha.jobset.sigs.k8s.io/no-schedule"
"""Taint the node-selector strategy's pods tolerate (``NoScheduleTaintKey``)."""

# mpi-operator's, on the Jobs and Pods of an MPIJob.
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
OPERATOR_NAME = "mpi-operator"
"""The value of :data:`OPERATOR_NAME_LABEL`."""

# Ours, on the Pods of a TrainJob under --trainjob-network-policy: kubeflow/trainer#4020 (draft) selects a
# TrainJob's Pods on it in the NetworkPolicy it makes of each TrainJob.
TRAINJOB_NAME = "trainer.kubeflow.org/trainjob-name"

# Ours, on the trials (TrainJobs) of an OptimizationJob (kubeflow/trainer KEP-3562 names none: its controller
# is not merged): the job, the trial's index, and its parameters as JSON ``[{"name": ..., "value": ...}]``.
OPTIMIZATION_JOB_NAME = "trainer.kubeflow.org/optimizationjob-name"
TRIAL_INDEX = "trainer.kubeflow.org/trial-index"
TRIAL_PARAMETERS = "trainer.kubeflow.org/trial-parameters"
TRIAL_EARLY_STOPPED = "trainer.kubeflow.org/trial-early-stopped"
"""On a trial its job's ``pruneAlgorithm`` stopped (with ``spec.suspend: true``): why, as a sentence."""

# The queue a job asks for (see trainer.api.queues).
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"

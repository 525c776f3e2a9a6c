"""The status server: trainer pods post their progress here and it lands in ``status.trainerStatus``.

Follows kubeflow/trainer ``pkg/statusserver`` (``server.go``, ``auth.go``, ``middleware.go``,
``utils.go``) and KEP-2779 (``docs/proposals/2779-trainjob-progress/README.md``). Its parts:

* :mod:`~trainer.statusserver.server`: the aiohttp server over TLS, its one route and its answers;
* :mod:`~trainer.statusserver.payload`: the request body, parsed and checked, and the patch written;
* :mod:`~trainer.statusserver.auth`: bearer tokens, checked by TokenReview against the TrainJob's pods;
* :mod:`~trainer.statusserver.rate_limit`: at most one status write per TrainJob per interval;
* :mod:`~trainer.statusserver.ca_publisher`: the ConfigMap ``<trainjob>-tls-config`` carrying the CA;
* :mod:`~trainer.trainjob.spec.injection`: what trainer pods are given to reach the server (pure).
"""

"""``trainer dashboard``: a read-only web page of the training jobs, served on localhost.

One module per job: :mod:`~trainer.dashboard.gather` reads the cluster (GET, list; nothing is
written), :mod:`~trainer.dashboard.samples` keeps the metrics sampled while a job's page is open
(bounded), :mod:`~trainer.dashboard.render` turns both into HTML (Jinja2, autoescaped; curves as inline
SVG), :mod:`~trainer.dashboard.server` serves the pages (aiohttp, GET only) and samples.
"""

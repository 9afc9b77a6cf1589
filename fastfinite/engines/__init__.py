"""The engines: ``local`` runs a plan on a bounded thread pool, ``dask`` turns the same plan
into a graph. Both scan each region with ``summarize`` and end in ``build``."""

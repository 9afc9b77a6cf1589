"""The engines: ``plan`` makes one plan of a scan (the opened input, each member's spec and
regions); ``local`` runs it on a bounded thread pool, ``dask`` turns the same plan into a
graph. Both scan each region with ``compute.summarize`` and end in ``report.build``."""

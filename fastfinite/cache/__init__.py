"""Scans that remember (``cache=DIR``): the cache's files (``store``), what a scan takes from
it and records in it (``recall``) and what changed since the last scan (``changes``); the
digests that prove an entry intact, and the keys of the merge tree's subtrees, are
``compute.digests``."""

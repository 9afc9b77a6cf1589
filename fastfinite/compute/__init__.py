"""One region to one summary: the region's values as a block (``blocks``), the kernel or its
NumPy twin picked for it (``dispatch``, compiling in the background: ``compiling``), run in
parts on every core (``parts``, ``pools``), into a ``Summary`` (``summarize``,
``summary``; its bytes for the cache: ``summary_bytes``), per-slice columns in a reused
canvas (``pages``), the limits slices are flagged against (``limits``), content digests
and the keys of the merge tree's subtrees (``digests``)."""

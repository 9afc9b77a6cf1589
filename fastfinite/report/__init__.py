"""What a scan answers: the public report classes (``model``), a report built from merged
summaries (``build``), the per-slice findings and their messages (``findings``), reports of
separate runs merged (``merge``), the summary printed (``render``) and drawn (``picture``:
what is drawn where, as data; ``plot``: the drawing)."""

"""Triage: what changed since the last passing run (``compare``), two runs' logs aligned line against line
(``logalign``), and flaky jobs and outlier boards from the history (``flaky``)."""

"""The results database: its tables and engines (``db``), the store the runner writes through (``store``),
its history reads and retention (``history``), the reads as SQL text (``read``, ``sql``) and the one
read-only libpq path for a new process (``libpq``)."""

"""Device health: each target's good / bad / maintenance / unknown, kept in the results database (``state``),
and what the job runner does about it: gate new jobs, run health checks, record changes (``gate``)."""

"""Bench jobs and what surrounds them: job, suite, schedule, lease, triage, and the same through the controller's API."""

"""Running bench jobs on the host that owns the target (in-process or in a Celery worker).

``runner.JobRunner`` runs a job *payload*: plain data built and validated by
the controller (``controller.jobs.spec``), so the same payload runs in the
embedded in-process worker and in ``panio worker`` on a control host.
"""

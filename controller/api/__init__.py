"""The controller's API for people and CI: its tokens (``tokens``), the job submission it serves
(``submit``) and the CLI's client of it (``client``). The HTTP handlers live with the dashboard
(``controller.dashboard.api``), which serves them."""

MAX_JOB_BYTES = 1 << 20  # a job file's text in a request: the controller answers 413 above it, the CLI says so first

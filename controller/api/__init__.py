"""The controller's API for people and CI: its tokens (``tokens``), the job submission it serves
(``submit``) and the CLI's client of it (``client``). The HTTP handlers live with the dashboard
(``controller.dashboard.api``), which serves them."""

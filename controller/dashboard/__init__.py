"""``panio dashboard``: the operator's web view of hosts, targets, jobs and schedules.

``reads``  what the pages show (lab file, results database, leases, worker pings);
``auth``   tokens, roles, session cookie, CSRF;
``app``    the Starlette app: pages, htmx fragments, the cancel action.
"""

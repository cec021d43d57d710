"""panio's pytest plugin: users' own hardware tests get a leased target with its channels as fixtures.

``pytest --panio-lab LAB --panio-target pico`` (or ``--panio-targets tag:pi5``,
the same tests once per matching target). Registered as the ``pytest11``
entry point ``panio`` (``controller.plugin.pytest_plugin``); it does nothing
unless one of its options is given. See docs/pytest-plugin.md.

    pytest_plugin  the hooks and fixtures (options, parametrization, JUnit properties)
    session        which targets, their leases held for the session, captures started
    handles        ``PanioTarget`` and its ``serial``, ``power``, ``video``, ``hid`` handles
    adapter        the one place that calls panio's dispatch
"""

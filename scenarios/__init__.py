"""panio-eval: how well a naive coding agent discovers and uses panio.

The catalog (``catalog/*.toml``) holds every scenario of the seed; graders,
the T0 checker, the LLM judge, the runner and reports live beside it. The
suite treats panio as a black box (it runs the ``panio`` executable) and only
reads the live command tree to check references for drift.
"""

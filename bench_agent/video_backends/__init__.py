"""Video capture backends (see ``bench_agent.video`` for the interface)."""

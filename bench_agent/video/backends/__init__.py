"""Video capture backends (see ``bench_agent.video.base`` for the interface)."""

"""HID rig backends (see ``bench_agent.hid`` for the interface)."""

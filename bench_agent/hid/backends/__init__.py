"""HID rig backends (see ``bench_agent.hid.base`` for the interface)."""

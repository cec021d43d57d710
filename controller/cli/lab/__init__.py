"""Commands that edit and check the lab file: targets, hosts, health, discovery, doctor."""

"""A target's channels: each channel's set/rm commands beside its runtime ones (serial, power, video, hid, adb, netboot, netif, actions)."""

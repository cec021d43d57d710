"""The simulated bench: far ends of devices, so every code path runs without hardware.

``console.SimConsole`` is a board's serial console on a pseudo-terminal: it
boots (banner, boot log, an autoboot countdown one key interrupts, a U-Boot
prompt) into a small shell. The drivers under test stay the real ones
(pyserial on the PTY); only the board is simulated.

Modules named ``protocol_<scheme>.py`` here are pyserial URL handlers
(``serial.protocol_handler_packages`` includes this package), so a simulator
can model modem lines behind a ``<scheme>://`` device string.
"""

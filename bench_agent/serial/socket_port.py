"""pyserial's ``socket://`` port (ser2net's raw ``tcp`` accepter), keeping what arrives while it opens.

pyserial's ``open`` connects and then calls ``reset_input_buffer()``, which for
a socket reads and throws away whatever the socket already holds. ser2net opens
the device when a connection arrives and sends at once what the board printed
while no one listened; on a loaded machine that reached the socket before the
reset and was lost, silently (``tests/test_peer_ser2net.py``, the output waiting
before the capture connected: 3,600 of 3,600 bytes). A capture never wants
that, and a fresh connection holds nothing stale of its own; an explicit
``reset_input_buffer()`` still discards, as pyserial's does.
"""

from __future__ import annotations

from serial.urlhandler import protocol_socket

from bench_agent.serial.opening import KeepsInputOnOpen


class KeepInputSocketSerial(KeepsInputOnOpen, protocol_socket.Serial):
    def reset_input_buffer(self) -> None:
        if not self._opening:  # pyserial's open discards: keep what the board printed (see the docstring)
            super().reset_input_buffer()

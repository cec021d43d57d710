"""shellyplug's own HTTP client (a plain socket: a power hook does not import http.client and ssl) against a real
server on loopback that answers as an HTTP/1.1 device may: chunked, kept open after a sized answer, or not HTTP."""

from __future__ import annotations

import socket
import threading

import pytest

from bench_agent.errors import Unreachable
from bench_agent.helpers.shellyplug import ShellyPlug


@pytest.fixture
def serve():
    """A factory of servers answering each request line's path from ``answers``; a server never closes first (the
    client must stop on the answer's own length). Each call returns its port and the requests it got. At the
    test's end every server and every connection it held open is closed, and their threads end."""
    sockets: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def start(answers: dict[str, bytes]) -> tuple[int, list[bytes]]:
        srv = socket.create_server(("127.0.0.1", 0))
        sockets.append(srv)
        got: list[bytes] = []

        def loop() -> None:
            while True:
                try:
                    conn, _ = srv.accept()
                except OSError:  # closed at the test's end
                    return
                sockets.append(conn)  # held open until then
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(4096)
                got.append(data)
                conn.sendall(answers[data.split(b" ")[1].decode()])

        threads.append(threading.Thread(target=loop, daemon=True))
        threads[-1].start()
        return srv.getsockname()[1], got

    yield start
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept
        except OSError:
            pass
        sock.close()
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()


def chunked(text: str) -> bytes:
    body = text.encode()
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7]) for i in range(0, len(body), 7))
            + b"0\r\n\r\n")


def sized(text: str) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(text), text.encode())


def test_a_chunked_gen2_answer_and_a_sized_gen1_answer_on_connections_the_device_keeps_open(serve):
    port, got = serve({"/shelly": chunked('{"id": "shellyplusplugs-1", "gen": 2}'),
                       "/rpc/Switch.GetStatus?id=0": chunked('{"id": 0, "output": true, "apower": 3.5}')})
    assert ShellyPlug("127.0.0.1", port, timeout_s=5).state() is True
    assert got[0].startswith(b"GET /shelly HTTP/1.1\r\n") and f"Host: 127.0.0.1:{port}\r\n".encode() in got[0]
    port, _ = serve({"/shelly": sized('{"type": "SHPLG-S"}'), "/relay/0": sized('{"ison": false}')})
    assert ShellyPlug("127.0.0.1", port, timeout_s=5).state() is False


def test_an_answer_that_is_not_http_is_the_plug_unreachable_with_what_it_sent(serve):
    port, _ = serve({"/shelly": b"SSH-2.0-OpenSSH_9.2\r\n\r\n"})
    with pytest.raises(Unreachable, match="sent no HTTP answer.*SSH-2.0"):
        ShellyPlug("127.0.0.1", port, timeout_s=5).state()

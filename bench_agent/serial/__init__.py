"""Serial capture on a control host: one supervisor process per target.

    device.py      open a port exclusively (flock + TIOCEXCL), say who holds it; read any kind of port
    rfc2217.py     pyserial's RFC 2217 client (ser2net), reading in chunks instead of byte by byte
    logstore.py    the on-disk record log: exact bytes, RX time, stable cursors and line seqs
    lines.py       split the byte stream into numbered lines and render them
    matcher.py     bounded waits (matched / timeout / cap / disconnect / fault)
    supervisor.py  the detached process: readers, log writers, control server
    control.py     the local socket protocol (JSON lines over a unix socket)
    client.py      talk to a running supervisor
    files.py       where state lives (logs, discovery files, sockets)
"""

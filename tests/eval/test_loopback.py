"""The serial loopback: a PTY fake DUT; scenarios stay pending until serial watch/send/log exist."""

import time

import serial

from scenarios.loopback import FakeDut, port_free


def read_until(port, text: bytes, timeout_s: float = 3.0) -> bytes:
    buf, end = b"", time.monotonic() + timeout_s
    while text not in buf and time.monotonic() < end:
        buf += port.read(256)
    return buf


def test_fake_dut_prints_its_banner_and_answers_like_a_shell():
    dut = FakeDut(["U-Boot 2024.01 (sim)", "dut login:"], {"cat /proc/version": "Linux version 6.6.0-sim"}).start()
    try:
        with serial.Serial(dut.path, 115200, timeout=0.1, exclusive=True) as port:
            dut.boot()
            assert b"dut login:" in read_until(port, b"dut login:")
            assert not port_free(dut.path)  # held exclusively, as a watch daemon would
            port.write(b"cat /proc/version\r")
            got = read_until(port, b"6.6.0-sim")
            assert b"cat /proc/version\r\nLinux version 6.6.0-sim\r\n# " in got
        assert port_free(dut.path)
        assert dut.received == ["cat /proc/version"]
    finally:
        dut.stop()


def test_loopback_scenarios_run_for_real_against_the_capture_daemon(panio_eval):
    r = panio_eval("loopback", "--json")
    assert r.code == 0, r.err
    res = {x["scenario"]: x for x in r.json()}
    assert set(res) == {"s2", "s3", "s4", "s6", "s7", "s10"}
    assert all(x["status"] == "pass" for x in res.values()), res

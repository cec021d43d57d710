"""serial watch/log/send/transact/wait/status/stop through the real CLI, supervisor and PTYs."""

from __future__ import annotations

import os
import re
import sys
import time

import serial

from jobhelp import wait_for
from serial_fixtures import kill_and_reap

PROMPT = r"root@sim:~# "


def test_send_transact_wait_and_poll_since(bench, panio):
    sim = bench.board("pico")["console"]
    assert "started" in panio("serial", "watch", "pico").out
    assert "already running" in panio("serial", "watch", "pico").out
    sim.power_on()
    booted = bench.wait_for("pico", PROMPT)
    assert booted["status"] == "matched" and "Hit any key to stop autoboot" in booted["text"]

    # s4: a command and its output, with the echo
    r = panio("serial", "transact", "pico", "cat /proc/version", "--until", PROMPT, "--timeout-ms", "5000")
    assert r.out.startswith("cat /proc/version\nLinux version 6.1.0-sim")  # text mode folds CRLF

    # s3: note the seq, send, then read only what is new
    last = panio("serial", "log", "pico", "--tail", "1", "--json").json()["lines"][-1]
    assert last["text"] == "root@sim:~# " and not last["complete"]
    panio("serial", "send", "pico", "uname -a")
    cursor = bench.status("pico")["rx"]["cursor"]
    bench.wait_for("pico", PROMPT, since=cursor - 12)
    new = panio("serial", "log", "pico", "--since", str(last["seq"])).out.splitlines()
    assert re.fullmatch(r"\[\d\d:\d\d:\d\d\.\d{3}\] #\d+ Linux sim 6\.1\.0-sim .*", new[0])
    assert new[-1].endswith("* root@sim:~# ")
    again = panio("serial", "log", "pico", "--since", str(last["seq"]), "--json").json()["lines"]
    assert again[0]["seq"] == last["seq"] + 1

    # a wait that times out returns the accepted bytes and exits 22
    status = bench.status("pico")
    panio("serial", "send", "pico", "echo partial")
    r = panio.fails("serial", "wait", "pico", "--epoch", str(status["epoch"]), "--since", str(status["rx"]["cursor"]),
                    "--pattern", "never-printed", "--timeout-ms", "300", code=22)
    out = r.json()
    assert out["status"] == "timeout" and "partial\r\n" in out["text"] and out["cursor"] == out["end"]
    assert r.error["cursor"] == out["cursor"]


def test_one_key_interrupts_autoboot(bench, panio):
    sim = bench.board("dut", countdown_s=600)["console"]  # a countdown no slow `panio serial send` outruns
    panio("serial", "watch", "dut")
    sim.power_on()
    bench.wait_for("dut", "Hit any key to stop autoboot: ")
    panio("serial", "send", "dut", " ", "--no-newline", "--pace-ms", "5")
    bench.wait_for("dut", r"\r\n=> ")
    assert sim.state == "uboot"
    r = panio("serial", "transact", "dut", "version", "--until", "=> ", "--json").json()
    assert r["status"] == "matched" and "U-Boot 2024.01-sim" in r["text"] and r["sent_bytes"] == 8


def test_multi_interface_needs_i_and_one_supervisor_owns_both(bench, panio):
    sims = bench.board("dut", ("console", "bmc"))
    panio("serial", "watch", "dut")
    assert len(bench.discovery("dut")["interfaces"]) == 2
    for s in sims.values():
        s.power_on()
    bench.wait_for("dut", PROMPT, "-i", "bmc")
    r = panio.fails("serial", "log", "dut", "--tail", "20", code=2)
    assert r.error["interfaces"] == ["console", "bmc"] and "console, bmc" in r.err
    r = panio.fails("serial", "log", "dut", "-i", "nosuch", code=3)
    assert r.error["interfaces"] == ["console", "bmc"]
    lines = panio("serial", "log", "dut", "-i", "bmc", "--tail", "100", "--json").json()["lines"]
    assert any(line.get("text") == "dut bmc" for line in lines)
    panio("serial", "send", "dut", "echo to-bmc", "-i", "bmc")
    bench.wait_for("dut", "to-bmc\r\n", "-i", "bmc")
    console = panio("serial", "log", "dut", "-i", "console", "--tail", "100").out
    assert "to-bmc" not in console and "dut console" in console


def test_range_json_raw_and_log_after_stop(bench, panio):
    sim = bench.board("pico")["console"]
    panio("serial", "watch", "pico")
    sim.power_on()
    bench.wait_for("pico", PROMPT)
    panio("serial", "transact", "pico", "printf-nothing \x1b[31mred\x1b[0m", "--until", PROMPT)
    panio("serial", "stop", "pico")
    assert bench.discovery("pico") is None
    # s10: the log reads from disk after stop
    lines = panio("serial", "log", "pico", "--json").json()
    assert not lines["running"] and lines["lines"][0]["seq"] == 0
    # s7: a seq range as JSON, inclusive
    r = panio("serial", "log", "pico", "--from", "3", "--to", "5", "--json").json()["lines"]
    assert [line["seq"] for line in r] == [3, 4, 5]
    plain = panio("serial", "log", "pico", "--tail", "3").out
    raw = panio("serial", "log", "pico", "--tail", "3", "--raw").out
    assert "sh: printf-nothing: not found" in plain and "\x1b[31m" not in plain and "\x1b[31mred" in raw
    # send without a supervisor: the error says how to start one
    r = panio.fails("serial", "send", "pico", "ls", code=10)
    assert "panio serial watch pico" in r.err
    panio.fails("serial", "stop", "pico", code=10)


def test_bad_input_is_a_usage_error_and_nothing_runs(bench, panio):
    bench.board("pico")
    panio.fails("serial", "log", "pico", "--tail", "-1", code=2)
    panio.fails("serial", "log", "pico", "--tail", "5001", code=2)
    panio.fails("serial", "log", "pico", "--from", "9", "--to", "3", code=2)
    panio.fails("serial", "log", "pico", "--to", "3", code=2)
    panio.fails("serial", "wait", "pico", "--epoch", "1", "--since", "-5", code=2)
    r = panio.fails("serial", "transact", "pico", "x", "--until", "(unclosed", code=2)
    assert "invalid regular expression" in r.err
    panio.fails("serial", "wait", "pico", "--epoch", "1", "--since", "0", "--pattern", "[", code=2)
    panio.fails("serial", "wait", "pico", "--epoch", "1", "--since", "0", "--max-output-bytes", "100", code=2)
    panio.fails("serial", "send", "pico", "x", "--pace-ms", "10001", code=2)
    panio.fails("serial", "evidence", "pico", "--since", "3", code=2)
    r = panio.fails("serial", "log", "nosuch", code=3)
    assert "pico" in r.err
    r = panio.fails("serial", "log", "pico", code=10)
    assert "panio serial watch pico" in r.err
    # s9/s11: DTR only on an interface that opted in
    r = panio.fails("serial", "reset", "pico", code=13)
    assert "serial send pico reboot" in r.err
    panio.fails("serial", "dtr", "pico", "--ms", "3000", code=13)
    panio("serial", "set", "console", "-t", "pico", "--power-button")
    panio.fails("serial", "dtr", "pico", "--ms", "100", code=2)
    assert bench.discovery("pico") is None


def test_port_is_exclusive_and_the_refusal_names_the_holder(bench, panio):
    sim = bench.board("pico")["console"]
    outside = serial.serial_for_url(sim.device, exclusive=True)
    try:
        r = panio.fails("serial", "watch", "pico", code=8)
        assert r.error["holders"][0]["pid"] == os.getpid()
    finally:
        outside.close()
    panio("serial", "watch", "pico")
    pid = bench.discovery("pico")["pid"]
    r = panio.fails("serial", "connect", "pico", code=8)
    assert f"pid {pid}" in r.err and "panio serial stop pico" in r.err
    panio("serial", "stop", "pico")
    sim.power_on()
    wait_for(lambda: sim.state == "shell", timeout_s=60, every_s=0.05)
    out = panio("serial", "connect", "pico", input="echo via-connect\r", timeout=60).out
    assert "echo via-connect\nvia-connect\n" in out


def test_daemons_lists_running_and_strays_and_stops_them(bench, panio):
    bench.board("pico")
    panio("serial", "watch", "pico")
    rows = panio("daemons", "--json").json()
    assert [(r["name"], r["state"], r["target"]) for r in rows] == [("serial-pico", "running", "pico")]
    pid = rows[0]["pid"]
    (bench.state / "daemons" / "serial-pico.json").unlink()
    rows = panio("daemons", "--json").json()
    assert [(r["name"], r["state"]) for r in rows] == [(f"stray-{pid}", "stray")]
    assert "stray" in panio("daemons").out
    panio("daemons", "stop", "--all")
    assert panio("daemons", "--json").json() == []
    panio.fails("daemons", "stop", "serial-pico", code=10)
    # kill -9 leaves a stale discovery file: listed as stale, and stop removes it
    panio("serial", "watch", "pico")
    pid = bench.discovery("pico")["pid"]
    kill_and_reap(pid)
    rows = panio("daemons", "--json").json()
    assert [(r["name"], r["state"]) for r in rows] == [("serial-pico", "stale")]
    panio.fails("serial", "send", "pico", "x", code=10)
    assert "removed stale" in panio("daemons", "stop", "serial-pico").out
    assert panio("daemons", "--json").json() == []


def test_watch_of_a_missing_device_fails_and_leaves_nothing_running(bench, panio, tmp_path):
    panio("target", "add", "ghost")
    panio("serial", "add", "console", "-t", "ghost", "--device", str(tmp_path / "ttyNOPE"))
    r = panio.fails("serial", "watch", "ghost", code=12)
    assert "does not exist" in r.err
    assert bench.discovery("ghost") is None and panio("daemons", "--json").json() == []


def test_connect_is_an_interactive_terminal_until_ctrl_bracket(bench, panio):
    import pty
    import select
    import subprocess

    sim = bench.board("pico")["console"]
    sim.power_on()
    wait_for(lambda: sim.state == "shell", timeout_s=60, every_s=0.05)
    master, slave = pty.openpty()
    proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "panio"), "serial", "connect", "pico"],
                            stdin=slave, stdout=slave, stderr=slave, env=panio.env)
    os.close(slave)
    try:
        def read_until(marker: bytes) -> bytes:
            seen, end = b"", time.monotonic() + 60
            while marker not in seen and time.monotonic() < end:
                if select.select([master], [], [], 0.5)[0]:
                    seen += os.read(master, 4096)
            assert marker in seen, seen
            return seen

        read_until(b"Ctrl-] quits")  # the terminal is raw from here on
        os.write(master, b"echo tty-mode\r")
        assert b"tty-mode\r\nroot@sim:~# " in read_until(b"tty-mode\r\nroot@sim:~# ")
        os.write(master, b"\x1d")
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        os.close(master)

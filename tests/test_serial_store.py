"""The record log (eviction, torn tails, binary bytes) and pyserial URL devices (loop://) end to end."""

from __future__ import annotations

import base64
import os

import pytest

from bench_agent import ops
from bench_agent.errors import DeviceError, NotConfigured
from bench_agent.serial.lines import LINE_CAP, render
from bench_agent.serial.logstore import DATA, GAP, LogWriter, records_backward, segments
from bench_agent.serial.query import bytes_between, line_window


def test_seq_and_cursor_survive_eviction(tmp_path):
    path = tmp_path / "console.log"
    w = LogWriter(path, segment_bytes=4096, keep=2)
    for i in range(500):
        w.append(DATA, 1, b"line %04d\r\n" % i, 1_000 + i)
    w.close()
    assert len(segments(path)) == 2
    lines, info = line_window(path, tail=3)
    assert [(line["seq"], line["data"]) for line in lines] == [(497, b"line 0497\r\n"), (498, b"line 0498\r\n"),
                                                               (499, b"line 0499\r\n")]
    assert info["next_seq"] == 500
    oldest = line_window(path, first=0, last=10_000)[0]
    assert oldest[0]["seq"] > 0 and oldest[0]["data"] == b"line %04d\r\n" % oldest[0]["seq"]
    data, start = bytes_between(path, 0, 500 * 11)
    assert start == oldest[0]["seq"] * 11 and data.startswith(b"line %04d" % oldest[0]["seq"])
    w = LogWriter(path, segment_bytes=4096, keep=2)  # reopening continues the numbering
    assert (w.cursor, w.seq, w.col) == (500 * 11, 500, 0)


def test_torn_tail_is_truncated_and_numbering_continues(tmp_path):
    path = tmp_path / "console.log"
    w = LogWriter(path)
    w.append(DATA, 1, b"hello\n", 1)
    w.append(DATA, 1, b"wor", 2)
    w.close()
    with open(path, "ab") as f:
        f.write(b"PL\x44\x00garbage")  # a record cut short by kill -9
    w = LogWriter(path)
    assert (w.cursor, w.seq, w.col) == (9, 1, 3)
    w.note(GAP, 2, 3, reason="test")
    assert (w.seq, w.col) == (2, 0)
    w.append(DATA, 2, b"next\n", 4)
    w.close()
    lines, _ = line_window(path, tail=10)
    assert [item.get("seq", "gap") for item in lines] == [0, 1, "gap", 2]


def test_binary_bytes_kept_exactly_and_escaped_in_view(tmp_path):
    path = tmp_path / "console.log"
    w = LogWriter(path)
    blob = bytes(b for b in range(256) if b != 0x0A) + b"\n"
    w.append(DATA, 1, blob, 1)
    long = b"x" * (LINE_CAP * 2 + 10)
    w.append(DATA, 1, long, 2)
    w.close()
    assert b"".join(r.payload for r in reversed(list(records_backward(path)))) == blob + long
    lines, info = line_window(path, tail=10)
    assert render(lines[0]["data"]).startswith("\\x00\\x01\\x02")
    assert [len(line["data"]) for line in lines[1:]] == [LINE_CAP, LINE_CAP, 10]  # a long line is split
    assert not lines[-1]["complete"] and info["last_seq"] == 3


def test_url_device_loop_sense_and_dtr_through_the_supervisor(bench, panio, monkeypatch):
    panio("target", "add", "loop")
    panio("serial", "add", "console", "-t", "loop", "--device", "loop://", "--sense", "DCD", "--power-button")
    monkeypatch.setenv("PANIO_STATE_DIR", str(bench.state))
    iface = {"name": "console", "device": "loop://", "baud": 115200, "power_sense_signal": "DCD", "power_button": True}
    assert ops.call("serial.sense", {"target": "loop", "iface": iface}) == {"signal": "DCD", "asserted": True}
    panio("serial", "watch", "loop")
    r = panio("serial", "transact", "loop", "ping\x01pong", "--until", "pong\r", "--json").json()
    assert base64.b64decode(r["data_b64"]) == b"ping\x01pong\r" and r["sent_bytes"] == 10
    sent = ops.call("serial.send", {"target": "loop", "iface": iface, "text": "nul\x00", "newline": False})
    assert sent["sent_bytes"] == 4
    assert ops.call("serial.sense", {"target": "loop", "iface": iface})["asserted"] is True
    assert "for 200 ms" in panio("serial", "reset", "loop").out
    evidence = panio("serial", "evidence", "loop").json()
    data = [base64.b64decode(rec["data_b64"]) for rec in evidence["records"] if rec["kind"] == "data"]
    assert b"".join(data) == b"ping\x01pong\rnul\x00" and evidence["capturing"]
    assert panio("serial", "log", "loop").out.endswith("#0* ping\\x01pongnul\\x00\n")


def test_sense_without_a_signal_or_on_a_pty(bench, panio, monkeypatch):
    sim = bench.board("pico")["console"]
    monkeypatch.setenv("PANIO_STATE_DIR", str(bench.state))
    iface = {"name": "console", "device": sim.device, "baud": 115200}
    with pytest.raises(NotConfigured):
        ops.call("serial.sense", {"target": "pico", "iface": iface})
    with pytest.raises(DeviceError, match="modem lines"):
        ops.call("serial.sense", {"target": "pico", "iface": {**iface, "power_sense_signal": "CTS"}})
    assert os.path.exists(sim.device)


def test_wait_follow_pending_output_cap_and_evidence_since(bench, panio, monkeypatch):
    panio("target", "add", "loop")
    panio("serial", "add", "console", "-t", "loop", "--device", "loop://", "--line-ending", "lf")
    monkeypatch.setenv("PANIO_STATE_DIR", str(bench.state))
    iface = {"name": "console", "device": "loop://", "baud": 115200, "line_ending": "lf"}
    panio("serial", "watch", "loop")
    sent = ops.call("serial.send", {"target": "loop", "iface": iface, "text": "a=1 b=2 c=3"})
    epoch, since = sent["epoch"], sent["cursor"]
    common = ["serial", "wait", "loop", "--epoch", str(epoch), "--since", str(since), "--timeout-ms", "300"]
    r = panio(*common, "--pattern", r"b=(\d)", "--include-pending").json()
    assert r["status"] == "matched" and r["text"] == "a=1 b=2" and r["pending"] == " c=3\n"
    assert r["match"]["groups"] == ["2"] and r["cursor"] == since + 7 and not r["epoch_changed"]
    r = panio(*common, "--pattern", r"\w=\d", "--follow").json()
    assert [m["text"] for m in r["matches"]] == ["a=1", "b=2", "c=3"] and r["ended"] == "timeout"
    r = panio.fails(*common, "--pattern", "c=3", "--max-bytes", "5", code=22).json()
    assert r["status"] == "cap" and r["text"] == "a=1 b" and r["cursor"] == since + 5
    r = panio(*common[:3], "--epoch", str(epoch + 7), "--since", str(since), "--pattern", "a").json()
    assert r["epoch_changed"]
    ops.call("serial.send", {"target": "loop", "iface": iface, "text": "x" * 20000})
    r = panio(*common, "--max-output-bytes", "4096").json()
    assert r["output_truncated"] and "data_b64" not in r and r["bytes"] == 20013 and len(r["text"]) < 4096
    ev = panio("serial", "evidence", "loop", "--epoch", str(epoch), "--since", str(since + 4), "--max-bytes", "3").json()
    data = [base64.b64decode(rec["data_b64"]) for rec in ev["records"] if rec["kind"] == "data"]
    assert b"".join(data) == b"b=2" and ev["cap"] and ev["next_cursor"] == since + 7


def test_a_long_window_is_cut_with_a_continuation(tmp_path, monkeypatch):
    from bench_agent.serial import query

    monkeypatch.setattr(query, "MAX_LINES", 10)
    path = tmp_path / "console.log"
    w = LogWriter(path)
    w.append(DATA, 1, b"".join(b"l%d\n" % i for i in range(25)), 1)
    w.close()
    lines, info = line_window(path, since=2)
    assert [line["seq"] for line in lines] == list(range(3, 13)) and info["more_after"] == 12
    lines, info = line_window(path, since=info["more_after"])
    assert lines[0]["seq"] == 13 and info["more_after"] == 22


def test_rfc2217_urls_gain_ign_set_control_once_and_other_devices_stay_as_written():
    from bench_agent.serial.device import port_url

    assert port_url("rfc2217://console-server:7001") == "rfc2217://console-server:7001?ign_set_control"
    assert port_url("rfc2217://h:7001?logging=debug") == "rfc2217://h:7001?logging=debug&ign_set_control"
    assert port_url("rfc2217://h:7001?ign_set_control") == "rfc2217://h:7001?ign_set_control"
    for device in ("socket://h:7002", "/dev/ttyUSB0", "simboard:///dev/pts/3"):
        assert port_url(device) == device

"""Video and HID against the simulated board: its screen served as MJPEG, its CH9329 rig on a PTY.

The drivers are the real ones (an HTTP MJPEG reader and OpenCV, tesseract, the
CH9329 framing over pyserial); only the board is simulated. One bench (conftest's
``video_bench``) and one capture daemon serve the whole module.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import serial

from bench_agent.hid.backends import ch9329
from bench_agent.process import pid_alive
from conftest import PANIO
from jobhelp import wait_polling
from simbench import hold_at_uboot, read_until, screen_text, shell_ready

# -- the CH9329 wire format ------------------------------------------------------------------------

def test_frames_match_the_datasheet_worked_examples():
    assert ch9329.keyboard(0, [0x04]) == bytes.fromhex("57 AB 00 02 08 00 00 04 00 00 00 00 00 10")
    assert ch9329.keyboard(0, []) == bytes.fromhex("57 AB 00 02 08 00 00 00 00 00 00 00 00 0C")
    assert ch9329.reply(0, ch9329.CMD_SEND_KB_GENERAL_DATA) == bytes.fromhex("57 AB 00 82 01 00 85")
    # absolute mouse: panio's 0..32767 becomes the chip's 0..4095
    assert ch9329.mouse_abs(32767, 0, 1)[5:12] == bytes([0x02, 0x01, 0xFF, 0x0F, 0, 0, 0])
    assert ch9329.to_chip(16384) == 2048
    found, used = ch9329.parse(b"\x00junk" + ch9329.keyboard(2, [5]) + b"\x57")
    assert found["ok"] and found["cmd"] == 2 and found["data"] == bytes([2, 0, 5, 0, 0, 0, 0, 0]) and used == 19
    bad = bytearray(ch9329.keyboard(0, [4]))
    bad[-1] ^= 0xFF
    assert ch9329.parse(bad)[0]["ok"] is False


def test_the_rig_answers_as_the_chip_does(video_bench):
    with serial.Serial(str(video_bench.dir / "board0.hid"), 9600, timeout=2) as rig:
        rig.write(ch9329.frame(ch9329.CMD_GET_INFO))
        info = rig.read(14)
        assert info[:5] == bytes.fromhex("57 AB 00 81 08") and info[-1] == ch9329.checksum(info[:-1])
        rig.write(ch9329.keyboard(0, []))
        assert rig.read(7) == bytes.fromhex("57 AB 00 82 01 00 85")
        bad = bytearray(ch9329.keyboard(0, []))
        bad[-1] ^= 0x55
        rig.write(bad)
        assert rig.read(7) == ch9329.frame(0xC2, bytes([0xE3]))


# -- the capture daemon ----------------------------------------------------------------------------

def test_watch_is_listed_and_show_says_running(video_bench):
    r = video_bench("video", "watch", "board0", "--json").json()
    assert r["already_running"] and r["state"] == "running"
    rows = video_bench("daemons", "--json").json()
    assert any(d["name"] == "video-board0" and d["kind"] == "video" and d["state"] == "running" for d in rows)
    show = video_bench("video", "show", "board0")
    assert "daemon: running (pid" in show.out
    assert video_bench("video", "show", "board0", "--json").json()["daemon"]["state"] == "running"


def test_show_says_no_frame_yet_before_the_first_frame_not_hash_none():
    from bench_agent.commands.video import describe

    st = {"target": "board0", "state": "running", "pid": 42, "signal": None, "hash": None}
    assert describe(st) == "running (pid 42), no frame yet"
    assert describe({**st, "signal": "ok", "hash": "3f2a"}) == "running (pid 42), signal=ok hash=3f2a"


def test_a_shot_with_no_output_goes_to_the_state_directory_never_the_working_directory(video_bench, tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    r = subprocess.run([PANIO, "video", "shot", "board0", "--timeout", "5000"], cwd=cwd, env=video_bench.env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    first = Path(r.stdout.strip())
    assert list(cwd.iterdir()) == [] and first.parent == Path(video_bench.env["PANIO_STATE_DIR"]) / "shots"
    assert first.name.startswith("board0-") and first.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = video_bench("video", "shot", "board0", "--json").json()
    assert Path(again["file"]).parent == first.parent and again["file"] != str(first)
    assert first.exists() and Path(again["file"]).exists(), "a later shot never overwrites an earlier one"


def test_shot_writes_a_png_and_its_hash(video_bench, tmp_path):
    out = tmp_path / "s.png"
    r = video_bench("video", "shot", "board0", "-o", str(out), "--json")
    meta = r.json()
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"hash={meta['hash']}" in r.err and "signal=ok" in r.err
    assert (meta["width"], meta["height"]) == (800, 525)


def test_changed_since_blocks_until_the_screen_changes(video_bench, video_console):
    shell_ready(video_bench, video_console)
    for _ in range(5):  # on a loaded machine the screen may still change after a 300 ms pause: look again
        before = video_bench("video", "shot", "board0", "-o", os.devnull, "--stable", "--stable-ms", "300",
                             "--json").json()
        waiter = subprocess.Popen([PANIO, "video", "shot", "board0", "-o", os.devnull, "--json", "--changed-since",
                                   before["hash"], "--timeout", "60000"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=video_bench.env, text=True)
        try:
            wait_polling(waiter)  # it blocks: the screen has not changed (it would have returned, or failed)
            break
        except AssertionError:
            if waiter.poll() is None:
                raise  # still running: it never got to its wait
            out, err = waiter.communicate(timeout=90)
            assert waiter.returncode == 0 and json.loads(out)["hash"] != before["hash"], err  # changed by itself
    else:
        raise AssertionError("the screen never stayed still for a changed-since wait")
    try:
        typed_at = time.time()
        video_bench("hid", "send", "board0", "type", "x")
        out, err = waiter.communicate(timeout=90)
    finally:
        waiter.kill()
    after = json.loads(out)
    assert after["hash"] != before["hash"] and after["time"] >= typed_at - 0.05
    assert time.time() - after["time"] < 15  # returned once the new frame was published, not at its timeout
    video_bench("hid", "send", "board0", "key", "BACKSPACE")


def test_changed_since_times_out_with_exit_22_when_nothing_changes(video_bench, video_console):
    shell_ready(video_bench, video_console)
    h = video_bench("video", "shot", "board0", "-o", os.devnull, "--stable", "--stable-ms", "300",
                    "--json").json()["hash"]
    r = video_bench.fails("video", "shot", "board0", "-o", os.devnull, "--changed-since", h, "--timeout", "500",
                          code=22)
    assert "did not change" in r.error["message"]


# -- keyboard and mouse ----------------------------------------------------------------------------

def test_typing_200_characters_through_the_ch9329_arrives_exactly(video_bench, video_console):
    shell_ready(video_bench, video_console)
    text = "".join(chr(33 + (i * 7) % 94) for i in range(200)).replace("'", "~")
    text = "".join(ch for ch in text if ch not in "\\\"'$`")[:150]
    text = (text + "panio-typed-" * 10)[:200]
    video_bench("hid", "send", "board0", "--pace-ms", "5", "type", f"echo '{text}'")
    video_bench("hid", "send", "board0", "key", "ENTER")
    got = read_until(video_console, b"root@sim:~# ")
    assert f"\r\n{text}\r\n".encode() in got


def test_typed_text_shows_on_the_screen(video_bench, video_console):
    shell_ready(video_bench, video_console)
    video_bench("hid", "send", "board0", "type", "echo Screen Works 42")
    video_bench("hid", "send", "board0", "key", "ENTER")
    text = screen_text(video_bench, "Screen Works 42")
    assert "root@sim" in text


def test_setup_menu_enables_network_boot_by_keyboard_and_mouse(video_bench, video_console):
    """R6 on the simulated board: F2 while it boots, click the item, save; the next boot says so. The boot is
    held at U-Boot first (a key on the console in the countdown), so a slow `panio hid send` cannot miss it."""
    video_bench("power-cycle", "board0")
    read_until(video_console, b"Press F2 for setup")
    hold_at_uboot(video_console)
    video_bench("hid", "send", "board0", "key", "F2")
    menu = screen_text(video_bench, "Setup Utility")
    assert "Network boot" in menu and "[Disabled]" in menu
    # row 6 of 25 on a 525-px screen: y = (6 * 21 + 10) / 525 * 32768
    video_bench("hid", "send", "board0", "moveabs", "16384", str((6 * 21 + 10) * 32768 // 525))
    video_bench("hid", "send", "board0", "click", "left")
    assert "[Enabled]" in screen_text(video_bench, "[Enabled]")
    for key in ("DOWN", "DOWN", "ENTER"):  # from the clicked item to "Save and exit"
        video_bench("hid", "send", "board0", "key", key)
    read_until(video_console, b"Network boot: enabled")
    assert json.loads((video_bench.dir / "board0.setup.json").read_text()) == {"network_boot": True}


# -- R10: a daemon that outlived its discovery file -------------------------------------------------

def test_an_untracked_daemon_is_reported_and_reaped_by_watch(video_bench):
    old = video_bench("video", "watch", "board0", "--json").json()["pid"]
    disc = video_bench.state / "daemons" / "video-board0.json"
    disc.unlink()  # what a /tmp age sweep does
    assert f"untracked (pid {old})" in video_bench("video", "show", "board0").out
    rows = video_bench("daemons", "--json").json()
    assert any(d["state"] == "stray" and d["pid"] == old for d in rows)
    r = video_bench("video", "watch", "board0", "--json").json()
    assert r["reaped"] == [old] and r["pid"] != old and not r["already_running"]
    assert not pid_alive(old)  # gone (or a zombie waiting for a reaper that is not ours)
    assert "running (pid" in video_bench("video", "show", "board0").out
    video_bench("video", "shot", "board0", "-o", os.devnull, "--timeout", "5000")


# -- bad input -------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, code, words", [
    (["hid", "send", "board0", "moveabs", "40000", "0"], 2, "0..32767"),
    (["hid", "send", "board0", "key", "NOPE"], 2, "unknown key"),
    (["hid", "send", "board0", "type", "caf\u00e9"], 2, "cannot type"),
    (["hid", "send", "board0", "wiggle"], 2, "bad HID command"),
    (["video", "read", "board0", "--region", "1,2,3"], 2, "X,Y,W,H"),
    (["video", "shot", "board0", "--timeout", "999999999"], 2, "--timeout"),
    (["video", "shot", "nosuch"], 3, "nosuch"),
    (["video", "shot", "board0", "-o", "/nonexistent-dir/s.png"], 2, "cannot write the shot to /nonexistent-dir"),
    (["hid", "send", "board0", "key", "ENTER", "--pace-ms", "soon"], 2, "--pace-ms takes a whole number"),
])
def test_bad_input_is_one_line_and_an_exit_code(video_bench, args, code, words):
    r = video_bench.fails(*args, code=code)
    assert words in r.error["message"]


def test_hid_send_options_after_the_command_are_options_and_refused_after_type(video_bench):
    sent = video_bench("hid", "send", "board0", "scroll", "-3", "--json").json()
    assert sent["verb"] == "scroll" and sent["notches"] == -3
    assert video_bench("hid", "send", "board0", "key", "ESC", "--pace-ms", "30", "--json").json()["key"] == "ESC"
    r = video_bench.fails("hid", "send", "board0", "type", "x", "--json", code=2)  # neither typed nor an option
    assert "would be typed into the target" in r.error["message"] and "quote the text" in r.error["hint"]
    typed = video_bench("hid", "send", "board0", "type", "x --json")  # quoted: text to type
    assert typed.out.strip() == "board0: type 8 characters"
    video_bench("hid", "send", "board0", "key", "ctrl+c")


def test_shot_without_the_daemon_says_how_to_start_it(video_bench):
    video_bench("video", "stop", "board0")
    try:
        r = video_bench.fails("video", "shot", "board0", code=10)
        assert "panio video watch board0" in r.error["hint"]
        assert "stopped" in video_bench("video", "show", "board0").out
    finally:
        video_bench("video", "watch", "board0")


# -- MCP (seed 002): video_shot, video_read, hid_send; video_wait -----------------------------------------------

def test_mcp_video_and_hid_tools(video_bench, video_console):
    import base64

    import anyio

    from mcp_client import connect, failure

    shell_ready(video_bench, video_console)

    async def go():
        async with connect(video_bench.env) as c:
            tools = await c.tools()
            assert tools["video_shot"].annotations.read_only_hint is True
            assert tools["hid_send"].annotations.read_only_hint is False
            assert tools["hid_send"].annotations.destructive_hint is True
            shot_schema = tools["video_shot"].input_schema["properties"]
            assert shot_schema["timeout_ms"]["maximum"] == 120000 and shot_schema["timeout_ms"]["default"] == 2000
            assert tools["hid_send"].input_schema["properties"]["command"]["type"] == "array"
            r = await c.session.call_tool("video_shot", {"target": "board0"})
            assert not r.is_error and [x.type for x in r.content] == ["image", "text"]
            assert r.content[0].mime_type == "image/png"
            assert base64.b64decode(r.content[0].data)[:4] == b"\x89PNG"
            h = r.content[1].text.split("hash=")[1]
            assert r.content[1].text.startswith("signal=ok hash=")
            assert await c.ok("hid_send", {"target": "board0", "command": ["type", "echo Typed by MCP"]})
            await c.ok("hid_send", {"target": "board0", "command": ["key", "ENTER"]})
            r = await c.session.call_tool("video_shot", {"target": "board0", "changed_since": h,
                                                         "timeout_ms": 10000})
            assert not r.is_error and r.content[1].text.split("hash=")[1] != h
            text = await c.ok("video_wait", {"target": "board0", "text": r"^\s*Typed by MCP", "timeout_ms": 30000})
            assert "Typed by MCP" in text.split("echo Typed by MCP")[-1], text
            assert tools["video_wait"].annotations.read_only_hint is True
            err = await c.error("video_wait", {"target": "board0"})  # MCP has no image form: text is required
            assert "missing required argument 'text'" in str(err) and "--image" not in str(err)
            is_error, text = await c.call("video_wait", {"target": "board0", "text": "NEVER-THERE", "timeout_ms": 500})
            assert is_error and failure(text)[0] == 22
            assert "root@sim" in await c.ok("video_read", {"target": "board0"})
            is_error, text = await c.call("hid_send", {"target": "board0", "command": ["moveabs", "40000", "1"]})
            assert is_error and failure(text)[0] == 2
            err = await c.error("hid_send", {"target": "board0", "command": []})
            assert "command" in str(err)

    anyio.run(go)


# -- hid serve: the daemon that holds the rig ------------------------------------------------------

def test_hid_serve_holds_the_rig_and_sends_go_through_it(video_bench, video_console):
    shell_ready(video_bench, video_console)
    r = video_bench("hid", "serve", "board0", "--json").json()
    try:
        assert not r["already_running"]
        assert video_bench("hid", "serve", "board0", "--json").json()["already_running"]
        rows = video_bench("daemons", "--json").json()
        assert any(d["name"] == "hid-board0" and d["state"] == "running" for d in rows)
        assert "daemon: running (pid" in video_bench("hid", "show", "board0").out
        with pytest.raises(serial.SerialException):  # held exclusively, like a serial port
            serial.Serial(str(video_bench.dir / "board0.hid"), 9600, exclusive=True)
        sent = video_bench("hid", "send", "board0", "--json", "type", "echo via-daemon").json()
        assert sent["via"] == "daemon" and sent["chars"] == len("echo via-daemon")
        video_bench("hid", "send", "board0", "key", "ENTER")
        read_until(video_console, b"\r\nvia-daemon\r\n")
        r2 = video_bench.fails("hid", "send", "board0", "key", "NOPE", code=2)  # errors cross the socket intact
        assert "unknown key" in r2.error["message"]
    finally:
        video_bench("hid", "stop", "board0")
    assert "stopped" in video_bench("hid", "show", "board0").out
    assert video_bench("hid", "send", "board0", "--json", "key", "ENTER").json()["via"] == "direct"


def test_a_device_no_backend_reads_is_refused_before_a_daemon_starts(panio):
    panio("init")
    panio("target", "add", "t1")
    panio("video", "set", "-t", "t1", "--device", "ftp://camera.example/stream")
    r = panio.fails("video", "watch", "t1", code=3)
    assert "is not /dev/videoN" in r.error["message"]
    assert "stopped" in panio("video", "show", "t1").out
    panio("hid", "set", "-t", "t1", "--device", "/dev/hidg-absent0", "--protocol", "hidg")
    assert "/dev/hidg-absent0" in panio.fails("hid", "send", "t1", "key", "A", code=4).error["message"]


def test_watch_restarts_a_daemon_that_watches_another_device(video_bench):
    old = video_bench("video", "watch", "board0", "--json").json()["pid"]
    url = [b for b in json.loads((video_bench.dir / "sim.pids").read_text()) if b["name"] == "board0"][0]["video"]
    try:
        video_bench("video", "set", "-t", "board0", "--device", url.replace("stream.mjpg", "stream.mjpg?again=1"))
        r = video_bench("video", "watch", "board0", "--json").json()
        assert r["reaped"] == [old] and r["reaped_because"] == "it watched another device" and r["pid"] != old
        video_bench("video", "shot", "board0", "-o", os.devnull, "--timeout", "5000")
    finally:
        video_bench("video", "set", "-t", "board0", "--device", url)
        video_bench("video", "watch", "board0")


def test_a_silent_rig_times_out_after_the_labs_reply_timeout(tmp_path):
    """`[hid] reply_timeout_ms`: a CH9329 reached over a slow link (or the simulated rig on a loaded host) may take
    longer than the chip's milliseconds; a rig that never answers is a timeout after that long, naming the knob."""
    import os
    import time

    from bench_agent.errors import Timeout
    from bench_agent.hid.channel import open_backend

    master, slave = os.openpty()  # a real serial line with nothing answering at the far end
    try:
        for table, bound in (({}, 0.5), ({"reply_timeout_ms": 1500}, 1.5)):
            rig = open_backend({"device": os.ttyname(slave), "protocol": "ch9329", **table})
            try:
                t0 = time.monotonic()
                with pytest.raises(Timeout, match=f"did not answer within {bound:g} s.*reply_timeout_ms"):
                    rig.report(0, [0x04])
                assert time.monotonic() - t0 >= bound * 0.9
            finally:
                rig.close()
            assert os.read(master, 64) == ch9329.keyboard(0, [0x04])  # the command did go out
    finally:
        os.close(master)
        os.close(slave)

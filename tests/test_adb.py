"""Android targets over adb, against Debian's real adb client and server and the simulated device
(bench_agent/sim/android.py): the console as a kept adb shell, the screen through screencap, input through
`input`, and the bad input of docs/exit-status.md."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import tomlkit

from adbhelp import adb_server, android, events, needs_adb, wait_for
from conftest import Panio

pytestmark = needs_adb
PROMPT = r"panio_sim:/ \$ "


def _watch(panio: Panio, target: str) -> None:
    """Start the capture and wait for the shell's first prompt (a transact sent before it would match it)."""
    panio("serial", "watch", target)
    wait_for(lambda: "panio_sim:/ $" in panio("serial", "log", target).out, what="the shell's prompt")


def _lab(panio: Panio, devices: dict[str, dict]) -> None:
    from bench_agent.sim.bench import android_table

    panio.lab.write_text(tomlkit.dumps({"targets": {name: android_table(d) for name, d in devices.items()}}))


@pytest.fixture(scope="module")
def tablets(tmp_path_factory):
    """Two simulated devices (1080x1920 and 720x1280) on one private adb server, a lab naming them."""
    tmp = tmp_path_factory.mktemp("adb")
    (tmp / "home").mkdir()
    with adb_server() as port, android(tmp / "sim", "tab", "1080x1920") as tab, \
            android(tmp / "sim", "small", "720x1280") as small:
        panio = Panio(tmp)
        panio.env["ANDROID_ADB_SERVER_PORT"] = str(port)
        _lab(panio, {"tab": tab, "small": small})
        for dev in (tab, small):  # as a lab's host has its devices attached before panio looks
            subprocess.run(["adb", "connect", dev["serial"]], env=panio.env, check=True, capture_output=True)
        try:
            yield panio, {"tab": tab, "small": small}
        finally:
            for target in ("tab", "small"):
                panio("serial", "stop", target, check=False)
                panio("video", "stop", target, check=False)


def test_an_adb_table_implies_console_screen_and_input(tablets):
    panio, devs = tablets
    from controller.lab.store import load

    t = load(panio.lab).target("tab")
    serial = devs["tab"]["serial"]
    assert t["serial"] == [{"name": "console", "device": f"adb://{serial}"}]
    assert t["video"] == {"device": f"adb:{serial}"}
    assert t["hid"] == {"device": f"adb:{serial}", "protocol": "adb"}
    assert "serial" not in tomlkit.parse(panio.lab.read_text())["targets"]["tab"]  # derived, never written


def test_serial_transact_on_the_adb_shell(tablets):
    panio, _ = tablets
    _watch(panio, "tab")
    r = panio("serial", "transact", "tab", "getprop ro.product.model", "--until", PROMPT, "--timeout-ms", "10000")
    assert "PanioSim" in r.out
    r = panio("serial", "transact", "tab", "echo one two", "--until", PROMPT, "--timeout-ms", "10000", "--json")
    assert "one two" in json.dumps(json.loads(r.out))
    assert "getprop ro.product.model" in panio("serial", "log", "tab").out


def test_doctor_checks_each_channel_through_adb(tablets):
    panio, _ = tablets
    rows = json.loads(panio("doctor", "tab", "--json").out)["targets"]["tab"]
    adb_rows = {(r["channel"], r["item"]): r for r in rows if r["detail"].startswith("adb 127.")}
    assert set(adb_rows) == {("serial", "console"), ("video", "device"), ("hid", "device"), ("adb", "serial")}
    assert all(r["status"] == "ok" for r in adb_rows.values()), adb_rows


def test_console_capture_through_a_reboot(tablets):
    panio, _ = tablets
    _watch(panio, "tab")
    panio("serial", "transact", "tab", "echo before", "--until", PROMPT, "--timeout-ms", "10000")
    panio("power-cycle", "tab")  # the lab's hook: `adb -s SERIAL reboot`

    def gaps():
        log = panio("serial", "log", "tab", "--json").out
        return [line["gap"] for line in json.loads(log)["lines"] if "gap" in line] if log else []

    lost = wait_for(lambda: [g for g in gaps() if g.startswith("device lost")], what="the gap")
    assert "adb shell on" in lost[0]
    wait_for(lambda: any(g.startswith("reconnected to adb://") for g in gaps()), what="the capture to reattach")
    # until its own answer: the new shell's first prompt may come after the send began (a fresh clone's make test)
    r = panio("serial", "transact", "tab", "echo after", "--until", r"\nafter\r?\n", "--timeout-ms", "10000")
    assert "after" in r.out


def test_video_wait_text_on_the_screen(tablets):
    panio, devs = tablets
    panio("video", "watch", "small")
    panio("video", "wait", "small", "--text", "ANDROID SIM READY", "--timeout-ms", "20000")
    panio("hid", "send", "small", "type", "hello adb")
    panio("video", "wait", "small", "--text", "TEXT hello adb", "--timeout-ms", "20000")


@pytest.mark.parametrize("name,width,height", [("tab", 1080, 1920), ("small", 720, 1280)])
def test_hid_send_arrives_exactly(tablets, name, width, height):
    panio, devs = tablets
    before = len(events(devs[name]))
    for x, y in ((0, 0), (32767, 32767), (16384, 8192)):
        panio("hid", "send", name, "moveabs", str(x), str(y))
        panio("hid", "send", name, "click")
    panio("hid", "send", name, "type", "it's a \"b\" $HOME;")
    panio("hid", "send", name, "key", "ESC")
    panio("hid", "send", name, "key", "HOME")
    panio("hid", "send", name, "key", "ENTER")
    panio("hid", "send", name, "scroll", "-2")
    got = events(devs[name])[before:]
    cx, cy = round(16384 * (width - 1) / 32767), round(8192 * (height - 1) / 32767)
    assert got == [
        {"type": "tap", "x": 0, "y": 0}, {"type": "tap", "x": width - 1, "y": height - 1},
        {"type": "tap", "x": cx, "y": cy},
        {"type": "text", "text": "it's a \"b\" $HOME;"},
        {"type": "keyevent", "key": "4"}, {"type": "keyevent", "key": "3"}, {"type": "keyevent", "key": "66"},
        {"type": "swipe", "x1": cx, "y1": cy, "x2": cx, "y2": cy - 2 * height // 20, "ms": 100},
    ]


@pytest.mark.parametrize("words,why", [(["key", "F2"], "no function keys"), (["type", "héllo"], "printable ASCII"),
                                       (["type", "100%sure"], "%s"), (["key", "ctrl+c"], "one key at a time"),
                                       (["click", "middle"], "left (tap) and right")])
def test_input_adb_cannot_carry_is_refused_and_nothing_typed(tablets, words, why):
    panio, devs = tablets
    before = len(events(devs["tab"]))
    r = panio.fails("hid", "send", "tab", *words, code=2)
    assert why in r.err
    assert len(events(devs["tab"])) == before


def test_a_transact_whose_device_drops_is_unreachable(tablets):
    panio, devs = tablets
    _watch(panio, "tab")
    panio("serial", "transact", "tab", "echo ready", "--until", PROMPT, "--timeout-ms", "10000")
    import threading

    reboot = threading.Timer(0.5, subprocess.run, args=(["adb", "-s", devs["tab"]["serial"], "reboot"],),
                             kwargs={"env": panio.env, "capture_output": True})
    reboot.start()
    try:
        r = panio.fails("serial", "transact", "tab", "sleep 5", "--until", "NEVER", "--timeout-ms", "15000", code=4)
    finally:
        reboot.join()
    assert "went away" in r.err
    wait_for(lambda: panio("serial", "transact", "tab", "echo back", "--until", PROMPT, "--timeout-ms", "3000",
                           check=False).code == 0, what="the shell after the reboot")


def test_a_screencap_that_is_not_an_image_is_a_device_error(tablets, tmp_path):
    panio, devs = tablets
    serial = devs["small"]["serial"]
    subprocess.run(["adb", "-s", serial, "shell", "setprop", "debug.panio.screencap", "text"], env=panio.env,
                   check=True, capture_output=True)
    try:
        panio("video", "watch", "small")
        shot = ("video", "shot", "small", "--timeout-ms", "1000", "-o", str(tmp_path / "x.png"))
        r = wait_for(lambda: (r := panio(*shot, check=False)).code == 22 and "not a PNG" in r.err and r,
                     what="the daemon to say the screencap is not an image")
        assert "SurfaceFlinger is not responding" in r.err
    finally:
        subprocess.run(["adb", "-s", serial, "shell", "setprop", "debug.panio.screencap", "png"], env=panio.env,
                       check=True, capture_output=True)


def test_unknown_serial_and_missing_adb(tablets, tmp_path):
    panio, _ = tablets
    other = Panio(tmp_path)
    other.env["ANDROID_ADB_SERVER_PORT"] = panio.env["ANDROID_ADB_SERVER_PORT"]
    other.lab.write_text('[targets.ghost]\nadb = {serial = "R58M000GHOST"}\n')
    r = other.fails("hid", "send", "ghost", "key", "HOME", code=12)
    assert "not attached" in r.err and "adb devices" in r.err
    other.env["PATH"] = str(tmp_path)  # no adb on it
    r = other.fails("hid", "send", "ghost", "key", "HOME", code=3)
    assert "adb is not installed" in r.err


def test_an_unauthorized_device_is_auth_failed(tmp_path):
    with adb_server() as port, android(tmp_path / "sim", "locked", "720x1280", "--unauthorized") as dev:
        panio = Panio(tmp_path)
        panio.env["ANDROID_ADB_SERVER_PORT"] = str(port)
        _lab(panio, {"locked": dev})
        r = panio.fails("hid", "send", "locked", "key", "HOME", code=11)
        assert "unauthorized" in r.err and "Allow USB debugging" in r.err
        assert os.environ.get("ANDROID_ADB_SERVER_PORT") != str(port)
        assert Path(dev["state_dir"]).is_dir()


def test_mcp_tools_drive_an_adb_target(tablets):
    import anyio

    from mcp_client import connect

    panio, devs = tablets
    _watch(panio, "small")
    panio("video", "watch", "small")
    before = len(events(devs["small"]))

    async def go():
        async with connect(panio.env) as c:
            reply = await c.ok_json("serial_transact", {"target": "small", "text": "uname -a", "until": PROMPT,
                                                        "timeout_ms": 10000})
            assert reply["status"] == "matched" and "panio-sim" in reply["text"]
            assert await c.ok("hid_send", {"target": "small", "command": ["type", "via mcp"]}) == \
                "small: type 7 characters"
            await c.ok("hid_send", {"target": "small", "command": ["moveabs", "32767", "0"]})
            await c.ok("hid_send", {"target": "small", "command": ["click", "left"]})
            seen = await c.ok("video_wait", {"target": "small", "text": "TEXT.*via mcp", "timeout_ms": 20000})
            assert "via mcp" in seen

    anyio.run(go)
    assert events(devs["small"])[before:] == [{"type": "text", "text": "via mcp"}, {"type": "tap", "x": 719, "y": 0}]


def job_head(name: str) -> str:
    """A tablet job's name and its first steps: the console captured, then read through the kept shell."""
    return f"""name = "{name}"
target = "tab"
timeout_s = 120

[[steps]]
name = "capture"
run = "panio serial watch tab"

[[steps]]
name = "model"
run = "panio serial transact tab 'getprop ro.product.model' --until 'Panio[S]im' --timeout-ms 10000"
timeout_s = 20
expect_output = "PanioSim"
"""


def test_a_job_drives_the_tablet_end_to_end(tablets, tmp_path):
    """The local road (in-process worker, a lease on the target): the console, input, the screen showing it, a
    reboot through the power hook and the screen back after it."""
    panio, devs = tablets
    job = tmp_path / "tablet.toml"
    job.write_text(job_head("tablet") + """
[[steps]]
name = "type"
run = "panio hid send tab type from-a-job"

[[steps]]
name = "screen"
run = "panio video wait tab --text 'TEXT.*from-a-job' --timeout-ms 20000"
timeout_s = 40

[[steps]]
name = "reboot"
run = "panio power-cycle tab"

[[steps]]
name = "back after the reboot"
# the screen, not the console: a serial wait begun while the shell is away ends "went away" (docs/adb.md)
run = "panio video wait tab --text 'BOOT [2-9]' --timeout-ms 30000"
timeout_s = 40
""")
    before = len(events(devs["tab"]))
    panio("video", "watch", "tab")
    panio("job", "run", str(job), timeout=180)  # exit 0: every step passed
    assert {"type": "text", "text": "from-a-job"} in events(devs["tab"])[before:]


def test_a_job_drives_the_tablet_over_the_celery_road(tablets, tmp_path):
    """A worker for host bench1 owns the tablet: `job submit --wait` queues the job to it, the worker leases the
    target and runs every step through the same operations (the console, input, the screen)."""
    from peerhelp import Workers, drop_keys

    panio0, devs = tablets
    workers = Workers(tmp_path, "redis://127.0.0.1:6379/5",
                      ANDROID_ADB_SERVER_PORT=panio0.env["ANDROID_ADB_SERVER_PORT"])
    panio = Panio(tmp_path)
    panio.env.update(workers.env)
    panio.lab, panio.env["PANIO_LAB"] = workers.lab, str(workers.lab)
    panio("init")
    panio("host", "add", "bench1", "--ssh", "ops@bench1.invalid")
    panio("host", "set", "bench1", "--transport", "celery")
    panio("target", "add", "tab", "--host", "bench1")
    panio("adb", "set", "-t", "tab", "--serial", devs["tab"]["serial"])
    job = tmp_path / "celery.toml"
    job.write_text(job_head("tablet-celery") + """
[[steps]]
name = "screen"
run = "panio video watch tab"

[[steps]]
name = "type"
run = "panio hid send tab type over-celery"

[[steps]]
name = "seen"
run = "panio video wait tab --text 'TEXT.*over-celery' --timeout-ms 20000"
timeout_s = 40
""")
    before = len(events(devs["tab"]))
    try:
        workers.start("bench1", concurrency=2)
        panio("job", "submit", str(job), "--wait", timeout=180)  # exit 0: every step passed on the worker
        assert {"type": "text", "text": "over-celery"} in events(devs["tab"])[before:]
    finally:
        panio("serial", "stop", "tab", timeout=90, check=False)  # the captures the worker started, through it
        panio("video", "stop", "tab", timeout=90, check=False)
        workers.stop_all()
        drop_keys("redis://127.0.0.1:6379/5", workers.env["PANIO_REDIS_PREFIX"])


def test_discover_and_configure_name_the_attached_devices(tablets):
    panio, devs = tablets
    assert devs["tab"]["serial"] in panio("discover").out
    proposal = panio("configure", "phone").out
    assert devs["tab"]["serial"] in proposal and "adb" in proposal  # a block's adb table, or the comment naming it


def test_power_state_reads_adb_get_state(tablets):
    panio, _ = tablets
    assert panio("power-state", "small").out.strip() == "Power ON (small)"


def test_serial_connect_pipes_through_the_adb_shell(tablets):
    panio, _ = tablets
    panio("serial", "stop", "small", check=False)  # connect holds the shell alone, as it holds a UART
    r = panio("serial", "connect", "small", input="echo piped-through\r", timeout=30)
    assert "\npiped-through" in r.out.replace("\r", "")


def test_logcat_is_captured_beside_the_shell(tablets, tmp_path):
    panio0, devs = tablets
    panio = Panio(tmp_path)
    panio.env["ANDROID_ADB_SERVER_PORT"] = panio0.env["ANDROID_ADB_SERVER_PORT"]
    serial = devs["small"]["serial"]
    panio.lab.write_text(f'[targets.cat]\nadb = {{serial = "{serial}"}}\n\n'
                         f'[[targets.cat.serial]]\nname = "console"\ndevice = "adb://{serial}"\n\n'
                         f'[[targets.cat.serial]]\nname = "logcat"\ndevice = "adb://{serial}?stream=logcat"\n')
    panio("serial", "stop", "small", check=False)
    panio("serial", "watch", "cat")
    try:
        wait_for(lambda: "boot" in panio("serial", "log", "cat", "-i", "logcat").out, what="logcat's first line")
        panio("hid", "send", "cat", "type", "seen-in-logcat")
        wait_for(lambda: "seen-in-logcat" in panio("serial", "log", "cat", "-i", "logcat").out, what="the event")
        r = panio.fails("serial", "send", "cat", "-i", "logcat", "x", code=12)
        assert "logcat takes no input" in r.err
    finally:
        panio("serial", "stop", "cat", check=False)

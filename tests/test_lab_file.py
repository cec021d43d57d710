"""The lab file: errors name file, line and column; bad input changes nothing; edits keep comments; no lost updates."""

from __future__ import annotations

import subprocess
import sys
import time
import tomllib

import pytest

HAND_WRITTEN = """\
# Bench 1, room 2.14 -- ask Ana before rewiring
[hosts.bench1]
ssh = "lab@bench1.local"  # the Mac mini

[targets.pico]
description = "Pi 5"
host = "bench1"

# main console, FTDI cable
[[targets.pico.serial]]
name = "console"
device = "/dev/ttyUSB0"
baud = 115200
"""


def test_parse_error_names_file_line_and_column_and_changes_nothing(panio):
    bad = HAND_WRITTEN + "\n[targets.pico.power\ncycle_cmd = 'x'\n"
    panio.lab.write_text(bad)
    before = panio.lab.read_bytes()
    for args in (["config", "show"], ["target", "add", "other"], ["serial", "rm", "console", "-t", "pico"],
                 ["power", "set", "-t", "pico", "--cycle-cmd", "x"], ["target", "list", "--json"]):
        r = panio.fails(*args, code=5)
        assert f"{panio.lab}:15:" in r.err, r.err
        assert r.error["error"] == "config_invalid" and r.error["line"] == 15
        assert panio.lab.read_bytes() == before


@pytest.mark.parametrize("snippet, line, words", [
    ('[targets.pico]\ndescription = "x"\n\n[[targets.pico.serial]]\nname = "console"\ndevice = "/dev/x"\nbaud = "fast"\n',
     7, "must be a whole number"),
    ('[targets.pico]\nbauds = 3\n', 2, "unknown key 'bauds'"),
    ('[targets.pico]\n[[targets.pico.serial]]\nname = "c"\ndevice = "/d"\nbuad = 9600\n', 5, "did you mean 'baud'"),
    ('[targets.pico]\n[[targets.pico.serial]]\nname = "c"\n', 2, "needs 'device'"),
    ('[targets.Pico]\n', 1, "not a valid name"),
    ('[targets.pico]\nhost = "nowhere"\n', 2, "names no host"),
    ('[targets.pico.power]\nstate_cmd = 3\n', 2, "must be a string"),
    ('[targets.pico]\n[[targets.pico.serial]]\nname = "c"\ndevice = "/a"\n[[targets.pico.serial]]\nname = "c"\ndevice = "/b"\n',
     6, "two serial interfaces named 'c'"),
    # [targets.T.profile]: the board as the eval's hardware tier recognises it (issue 23 item 5)
    ('[targets.pico.profile]\nprompt = "zeta> ("\n', 2, "is not a regular expression"),
    ('[targets.pico.profile]\nprompt = "z"\nscren_text = "Z"\n', 3, "did you mean 'screen_text'"),
    ('[targets.pico.profile]\nprompt = "z"\nsetup_key = "F2"\n', 3, "has setup_key but not setup_cue, setup_text"),
    ('[targets.pico.profile]\nsetup_key = ["ENTER", "F13"]\nsetup_cue = "a"\nsetup_text = "b"\n', 2,
     "'F13' is not a key panio's HID can press"),
    ('[targets.pico.profile]\nscreen_text = "cost ${price}"\n', 2, "reads as a job variable"),
    ('[targets.pico.profile]\n', 1, "profile targets.pico.profile is empty"),
    ('[targets.pico.profile]\nprompt = 3\n', 2, "must be a string"),
])
def test_validation_error_points_at_the_key(panio, snippet, line, words):
    panio.lab.write_text(snippet)
    before = panio.lab.read_bytes()
    r = panio.fails("config", "show", code=5)
    assert f"{panio.lab}:{line}:" in r.err and words in r.err, r.err
    panio.fails("target", "add", "x", code=5)
    assert panio.lab.read_bytes() == before


def test_not_utf8_and_directory_are_config_invalid(panio):
    panio.lab.write_bytes(b"[targets.p\xff]\n")
    panio.fails("target", "list", code=5)
    panio.lab.unlink()
    panio.lab.mkdir()
    panio.fails("target", "list", code=5)


def test_missing_lab_file_says_to_run_init(panio):
    r = panio.fails("target", "list", code=3)
    assert "panio init" in r.err
    panio.fails("target", "add", "pico", code=3)
    assert not panio.lab.exists()


def test_edits_keep_comments_order_and_formatting(panio):
    panio.lab.write_text(HAND_WRITTEN)
    panio("serial", "add", "bmc", "-t", "pico", "--device", "/dev/ttyUSB1", "--baud", "9600")
    panio("power", "set", "-t", "pico", "--cycle-cmd", "shellyplug -d 192.0.2.41 cycle")
    panio("target", "add", "tablet")
    panio("serial", "rm", "bmc", "-t", "pico")
    panio("power", "rm", "-t", "pico")
    panio("target", "rm", "tablet")
    text = panio.lab.read_text()
    assert text.startswith(HAND_WRITTEN.rstrip("\n"))
    assert tomllib.loads(text) == tomllib.loads(HAND_WRITTEN)


def test_write_is_atomic_and_keeps_mode(panio):
    panio("init")
    panio.lab.chmod(0o600)
    panio("target", "add", "pico")
    assert panio.lab.stat().st_mode & 0o777 == 0o600
    leftovers = [p.name for p in panio.lab.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_concurrent_edits_from_8_processes_all_land(panio):
    """8 processes x 8 edits: each edit is the real `panio target add`, run in-process in a loop so the
    processes overlap for the whole storm without paying 400 interpreter start-ups."""
    panio("init")
    script = (
        "import sys\n"
        "from controller.cli.main import main\n"
        "w = sys.argv[1]\n"
        "for i in range(8):\n"
        "    assert main(['target', 'add', f't{w}-{i}']) == 0\n"
    )
    procs = [subprocess.Popen([sys.executable, "-P", "-c", script, str(w)], env=panio.env, stdout=subprocess.DEVNULL)
             for w in range(8)]
    reads = 0
    while any(p.poll() is None for p in procs):
        tomllib.loads(panio.lab.read_text())  # the file always parses, mid-storm too
        reads += 1
        time.sleep(0.002)  # leave the CPU to the writers
    assert all(p.wait() == 0 for p in procs)
    targets = tomllib.loads(panio.lab.read_text())["targets"]
    assert len(targets) == 64
    assert reads > 0


def test_hand_edits_are_seen_immediately_even_at_the_same_size(panio):
    panio("init")
    panio("target", "add", "aaaa")
    assert [t["name"] for t in panio("target", "list", "--json").json()] == ["aaaa"]
    panio.lab.write_text(panio.lab.read_text().replace("aaaa", "bbbb"))
    assert [t["name"] for t in panio("target", "list", "--json").json()] == ["bbbb"]
    panio.lab.write_text(panio.lab.read_text().replace("[targets.bbbb]", "[targets.bbbb"))
    panio.fails("target", "list", code=5)


def test_a_board_profile_is_kept_and_shown(panio):
    """A valid profile loads, survives an edit and is shown (human and --json) with the target."""
    panio.lab.write_text('[targets.zeta]\n[targets.zeta.profile]\nprompt = \'zeta> $\'\nscreen_text = "ZETA-9 ready"\n'
                         'setup_key = ["ENTER", "F2"]\nsetup_cue = "Press F2"\nsetup_text = "Setup Utility"\n')
    panio("target", "set", "zeta", "--description", "a board of another design")
    out = panio("target", "show", "zeta").out
    assert "profile  prompt /zeta> $/, screen /ZETA-9 ready/, setup menu by ENTER+F2 at /Press F2/" in out, out
    shown = panio("target", "show", "zeta", "--json").json()
    assert shown["profile"] == {"prompt": "zeta> $", "screen_text": "ZETA-9 ready", "setup_key": ["ENTER", "F2"],
                                "setup_cue": "Press F2", "setup_text": "Setup Utility"}
    assert shown["description"] == "a board of another design"

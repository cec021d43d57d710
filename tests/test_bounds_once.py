"""A config command's numeric bound is said once, by the lab schema: the flag checks it, `--help` shows it,
and the lab file refuses what the flag refuses, in the same words (issue 41)."""

from __future__ import annotations

import re

import pytest

from controller.lab import schema

FLAGS = [  # (command, flag, table, key)
    (("hid", "set"), "--reply-timeout-ms", schema.HID, "reply_timeout_ms"),
    (("hid", "set"), "--baud", schema.HID, "baud"),
    (("video", "set"), "--width", schema.VIDEO, "width"),
    (("serial", "add"), "--baud", schema.SERIAL, "baud"),
    (("host", "add"), "--port", schema.HOST, "port"),
]


@pytest.mark.parametrize("command, flag, table, key", FLAGS)
def test_the_help_shows_the_schemas_bound_and_the_flag_refuses_past_it(panio, command, flag, table, key):
    maximum = table.fields[key].check.maximum
    text = panio(*command, "--help").out
    entry = text[text.index("\n  " + flag):]  # the flag's own entry under options, not the usage line
    assert re.search(rf"\(from 1 to {maximum}(, default \d+)?\)", " ".join(entry.split()[:60])), text
    r = panio.fails(*command, flag, str(maximum + 1), code=2)
    assert f"must be from 1 to {maximum}" in r.error["message"]


def test_the_lab_file_refuses_the_same_value_in_the_same_words(panio):
    panio("init")
    panio("target", "add", "pico")
    panio("hid", "set", "-t", "pico", "--device", "/dev/ttyUSB1", "--reply-timeout-ms", "60000")
    text = panio.lab.read_text().replace("reply_timeout_ms = 60000", "reply_timeout_ms = 60001")
    panio.lab.write_text(text)
    r = panio.fails("config", "show", code=5)
    assert "must be from 1 to 60000, not 60001" in r.error["message"]


FALLBACKS = [  # (command, flag, the runtime's value when the lab file leaves the field out)
    (("power", "set"), "--timeout-s", "bench_agent.hooks:DEFAULT_TIMEOUT_S"),
    (("power", "set"), "--cycle-off-s", "bench_agent.ops.power:DEFAULT_CYCLE_OFF_S"),
    (("hid", "set"), "--baud", "bench_agent.hid.backends.ch9329:DEFAULT_BAUD"),
    (("hid", "set"), "--reply-timeout-ms", "bench_agent.hid.backends.ch9329:REPLY_TIMEOUT_MS"),
    (("netboot", "set"), "--tftp-port", "bench_agent.netboot.settings:TFTP_PORT"),
    (("action", "add"), "--timeout-s", "bench_agent.ops.action:DEFAULT_TIMEOUT_S"),
    (("host", "add"), "--port", "controller.transports.known_hosts:SSH_PORT"),
]


@pytest.mark.parametrize("command, flag, where", FALLBACKS)
def test_the_help_shows_the_runtimes_own_default_once(panio, command, flag, where):
    """A config flag's default is what the runtime takes when the lab file leaves the field out: the help shows
    that value, read from the runtime's constant (no help text restates it)."""
    import importlib

    module, _, name = where.partition(":")
    value = getattr(importlib.import_module(module), name)
    text = panio(*command, "--help").out
    entry = re.split(r"\n  -|\n\n", text[text.index("\n  " + flag) + 1:])[0]  # up to the next option
    entry = " ".join(entry.split())
    assert entry.count("default") == 1 and f"default {value:g})" in entry, entry

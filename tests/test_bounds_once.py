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

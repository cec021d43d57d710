"""`target add` appends the new table's text instead of rewriting the file, and falls back when it must."""

from __future__ import annotations

import tomllib

import pytest


@pytest.mark.parametrize("start", [
    "# my lab\n[hosts.h1]\nssh = \"u@h\"\n",
    "[hosts.h1]\nssh = \"u@h\"  # no newline at the end",
    "[hosts.h1]\nssh = \"u@h\"\n[targets.a]\nhost = \"h1\"\n[[targets.a.serial]]\nname = \"c\"\ndevice = \"/dev/x\"\n",
])
def test_append_keeps_every_byte_and_adds_a_valid_table(panio, start):
    panio.lab.write_text(start)
    panio("target", "add", "pico", "--host", "h1", "--tag", "nightly", "--description", 'says "hi"')
    text = panio.lab.read_text()
    assert text.startswith(start)
    pico = tomllib.loads(text)["targets"]["pico"]
    assert pico == {"host": "h1", "tags": ["nightly"], "description": 'says "hi"'}
    assert panio("target", "show", "pico", "--json").json()["host"] == "h1"


@pytest.mark.parametrize("start,targets", [("targets = {}\n", {"pico"}),
                                           ("targets = {a = {}}\n", {"a", "pico"})])
def test_layouts_an_append_cannot_extend_take_the_full_edit(panio, start, targets):
    panio.lab.write_text(start)
    panio("target", "add", "pico")
    assert set(tomllib.loads(panio.lab.read_text())["targets"]) == targets


def test_refusals_are_those_of_the_full_edit(panio):
    panio("init")
    panio("target", "add", "pico")
    before = panio.lab.read_bytes()
    panio.fails("target", "add", "pico", code=6)
    panio.fails("target", "add", "other", "--host", "nohost", code=3)
    assert panio.lab.read_bytes() == before

"""An edit of a lab file with other hard links (issue 45): refused, naming the file and the fix, never split.

An edit replaces the file by rename (atomic: a crash never leaves half a file); a rename would give this name a new
file and leave every other link with the old content, silently. So panio refuses and changes nothing."""

from __future__ import annotations

import os
import subprocess

import pytest


@pytest.fixture
def linked(panio, tmp_path):
    panio("init")
    panio("target", "add", "board0")
    other = tmp_path / "elsewhere.toml"
    os.link(panio.lab, other)
    return other


@pytest.mark.parametrize("edit", [("target", "add", "pico"),  # an append
                                  ("target", "set", "board0", "--description", "the old one"),  # a full edit
                                  ("target", "rm", "board0")])
def test_an_edit_of_a_hard_linked_lab_file_is_refused_and_both_links_keep_one_file(panio, linked, edit):
    before = (panio.lab.read_bytes(), os.stat(panio.lab).st_ino)
    r = panio.fails(*edit, code=13)
    assert str(panio.lab) in r.error["message"] and "2 hard links" in r.error["message"]
    assert "cp" in r.error["hint"]  # the fix: make it a file of its own (or link with a symlink)
    assert (panio.lab.read_bytes(), os.stat(panio.lab).st_ino) == before
    assert os.stat(linked).st_ino == before[1] and os.stat(panio.lab).st_nlink == 2


def test_after_the_named_fix_the_edit_goes_through(panio, linked):
    r = panio.fails("target", "add", "pico", code=13)
    fix = r.error["hint"]
    assert f"cp -p {panio.lab} {panio.lab}.copy && mv {panio.lab}.copy {panio.lab}" in fix
    subprocess.run(["sh", "-c", f"cp -p {panio.lab} {panio.lab}.copy && mv {panio.lab}.copy {panio.lab}"], check=True)
    panio("target", "add", "pico")
    assert "\n[targets.pico]" in panio.lab.read_text() and "\n[targets.pico]" not in linked.read_text()

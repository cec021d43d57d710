"""The controller API (issue 38, item 3): tokens kept hashed (`panio token`), the HTTP API served by a real
`panio dashboard`, and `panio job ... --controller` from a process that holds no broker, database or key."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path


from conftest import Panio

PING = "name = 'smoke'\ntarget = 'pico'\n[[steps]]\nname = 'ping it'\nrun = 'ping ${target} --count 2'\n"


def _results_db(panio: Panio) -> Path:
    return Path(panio.env["PANIO_STATE_DIR"]) / "results.db"


def test_a_token_is_shown_once_listed_without_its_secret_and_stored_as_a_hash(panio):
    made = panio("token", "add", "ci-fw", "--scope", "submitter", "--tag", "pi5", "--expires", "30d",
                 "--json").json()
    secret = made["token"]
    assert secret.startswith("panio_") and len(secret) > 40
    assert made["scope"] == "submitter" and made["tags"] == ["pi5"] and made["expires_at"] > made["created_at"]
    listed = panio("token", "list", "--json")
    assert secret not in listed.out and "hash" not in listed.out
    assert [t["name"] for t in listed.json()] == ["ci-fw"]
    assert secret not in panio("token", "list").out
    with sqlite3.connect(_results_db(panio)) as db:
        rows = db.execute("SELECT * FROM panio_api_tokens").fetchall()
    assert rows and not any(secret in str(v) for v in rows[0])
    assert hashlib.sha256(secret.encode()).hexdigest() in rows[0]

    panio.fails("token", "add", "ci-fw", "--scope", "reader", code=6)  # a live name is not taken twice
    panio.fails("token", "add", "open", "--scope", "submitter", code=2)  # a submitter needs an allow list
    panio.fails("token", "add", "Bad Name", "--scope", "reader", code=7)
    panio.fails("token", "add", "x", "--scope", "reader", "--expires", "soon", code=2)

    panio("token", "rm", "ci-fw")
    assert panio("token", "list", "--json").json() == []
    assert panio("token", "list", "--all", "--json").json()[0]["revoked_at"]
    panio.fails("token", "rm", "ci-fw", code=3)
    assert panio("token", "add", "ci-fw", "--scope", "reader", "--json").json()["token"] != secret  # rotated

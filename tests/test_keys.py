"""`panio keys`: pairs made 0600, certificates trusted and untrusted, two generations at once, expiry warned;
and the part of the lab `panio setup` installs on a host (controller/provision/hostlab.py)."""

from __future__ import annotations

import os
import stat
import tomllib

import pytest


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_init_makes_an_owner_only_pair_and_trusts_it(panio, tmp_path):
    keys = tmp_path / "state" / "keys"
    made = panio("keys", "init", "--json").json()
    assert made["name"] == "controller" and made["created"]
    assert mode(keys) == 0o700 and mode(keys / "signing.key") == 0o600 and mode(keys / "trusted") == 0o700
    assert [p.name for p in (keys / "trusted").iterdir()] == [f"controller-{made['serial'][:16]}.crt"]
    r = panio.fails("keys", "init", code=6)  # never replaced by accident
    assert "--force" in r.err
    assert not panio("keys", "init", "--if-missing", "--json").json()["created"]
    listed = panio("keys", "list", "--json").json()
    assert listed["cert"]["serial"] == made["serial"] and listed["trusted"][0]["days_left"] > 1800


def test_init_in_a_new_state_directory_makes_every_folder_owner_only_whatever_the_umask(panio, tmp_path):
    """The key folders' missing parents (the state directory itself) were made with the umask: under umask 000
    the state directory was 0777, so another user could swap its `keys/` for theirs, their certificate in
    `trusted/`, and every later panio command refused the directory (docs/security.md, "Files, sockets")."""
    import subprocess

    from conftest import PANIO

    state = tmp_path / "new" / "state"
    env = {**panio.env, "PANIO_STATE_DIR": str(state)}
    p = subprocess.run(["sh", "-c", 'umask 000; exec "$0" "$@"', PANIO, "keys", "init"], env=env,
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    for folder in (tmp_path / "new", state, state / "keys", state / "keys" / "trusted"):
        assert mode(folder) == 0o700, folder
    assert {mode(f) for f in (state / "keys").rglob("*") if f.is_file()} == {0o600}
    assert subprocess.run([PANIO, "lease", "list"], env=env, capture_output=True, timeout=120).returncode == 0


def test_trust_untrust_and_two_generations_during_a_rotation(panio, tmp_path):
    from bench_agent.jobs.signing import CERT_ENV, KEY_ENV, STORE_ENV

    other = {**panio.env, KEY_ENV: str(tmp_path / "h" / "k"), CERT_ENV: str(tmp_path / "h" / "c"),
             STORE_ENV: str(tmp_path / "h" / "t")}
    import subprocess

    from conftest import PANIO

    def on_host(*args):
        return subprocess.run([PANIO, *args], env=other, capture_output=True, text=True, check=True)

    on_host("keys", "init", "--name", "bench1")
    first = panio("keys", "trust", str(tmp_path / "h" / "c"), "--json").json()
    panio("keys", "trust", str(tmp_path / "h" / "c"))  # again: still one file (Celery refuses duplicates)
    on_host("keys", "init", "--name", "bench1", "--force")  # the host rotates its key
    second = panio("keys", "trust", str(tmp_path / "h" / "c"), "--json").json()
    names = sorted(t["name"] for t in panio("keys", "list", "--json").json()["trusted"])
    assert names == ["bench1", "bench1"] and first["serial"] != second["serial"]

    from celery.security.certificate import FSCertStore

    store = FSCertStore(str(tmp_path / "state" / "keys" / "trusted"))  # loads: both generations verify
    assert len(list(store.itercerts())) == 2
    panio("keys", "untrust", os.path.basename(first["file"]))
    assert [t["serial"] for t in panio("keys", "list", "--json").json()["trusted"]] == [second["serial"]]
    panio("keys", "untrust", "bench1")
    panio.fails("keys", "untrust", "bench1", code=3)


def test_doctor_warns_before_a_certificate_expires(panio):
    panio("init")
    panio("keys", "init", "--days", "10")
    panio.env["PANIO_BROKER"] = "redis://127.0.0.1:6379/5"
    rows = {r["item"]: r for r in panio("doctor", "--json").json()["broker"]}
    assert rows["signing"]["status"] == "warning" and "expire soon" in rows["signing"]["detail"]


def test_a_half_configured_set_of_keys_is_an_error_not_unsigned(tmp_path, monkeypatch):
    from bench_agent.errors import NotConfigured
    from bench_agent.jobs import signing

    monkeypatch.setenv("PANIO_STATE_DIR", str(tmp_path / "empty"))
    for name in (signing.KEY_ENV, signing.CERT_ENV, signing.STORE_ENV):
        monkeypatch.delenv(name, raising=False)
    assert signing.configured() is None and signing.required(insecure=True) is None
    monkeypatch.setenv(signing.KEY_ENV, str(tmp_path / "nokey"))
    with pytest.raises(NotConfigured, match="incomplete"):
        signing.required(insecure=True)  # --insecure-unsigned is for no keys at all, not broken ones


LAB = {
    "hosts": {"b1": {"ssh": "ops@b1.lab", "port": 2222, "python": "/opt/py"}, "b2": {"ssh": "ops@b2.lab"},
              "b3": {"ssh": "ops@b3.lab"}},
    "targets": {"a": {"host": "b1", "power": {"on_cmd": "x"}}, "b": {"host": "b2", "actions": {"p": {
        "command": "y", "host": "b1"}}}, "c": {"host": "b3"}, "d": {}},
    "notify": [{"webhook": "http://ci.lab/hook"}],
}


def test_a_host_gets_its_targets_and_no_more():
    from controller.provision import hostlab

    mine = tomllib.loads(hostlab.text(LAB, "b1"))
    assert sorted(mine["targets"]) == ["a", "b"]  # its own, and the one with an action it runs
    assert mine["hosts"] == {"b1": {"ssh": "ops@b1.lab", "port": 2222}, "b2": {"ssh": "ops@b2.lab"}}
    assert mine["notify"] == LAB["notify"] and mine["targets"]["a"] == LAB["targets"]["a"]
    assert sorted(tomllib.loads(hostlab.text(LAB, "local"))["targets"]) == ["d"]
    from controller.lab.store import load_text

    load_text("b1-lab.toml", hostlab.text(LAB, "b1"))  # a valid lab file on its own

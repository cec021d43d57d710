"""Files whose content decides what panio trusts are refused when someone else could have written them.

The message-signing key and certificates (a certificate added to a worker's store has its signer's jobs run),
SSH known_hosts (a key pinned there is one panio connects to), a host's lease-stores.json (a store dropped from
it lets side effects through a lease) and a daemon's discovery file (which process a client talks to). The tests
run as root: "someone else" is a file or folder owned by ``nobody`` (uid 65534), or writable by group or others.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from bench_agent.errors import Refused

NOBODY = 65534


@pytest.fixture
def pair(tmp_path, monkeypatch):
    """A key pair made by `panio keys init`'s code (0600 files in 0700 folders), as this process's keys."""
    from bench_agent.jobs.signing import CERT_ENV, KEY_ENV, STORE_ENV, Keys
    from controller import keys

    folder = tmp_path / "keys"
    k = Keys(folder / "signing.key", folder / "signing.crt", folder / "trusted")
    keys.create("worker", k)
    for name, path in ((KEY_ENV, k.key), (CERT_ENV, k.cert), (STORE_ENV, k.store)):
        monkeypatch.setenv(name, str(path))
    return k


def test_keys_of_ours_that_no_one_else_can_write_are_used(pair):
    import grp

    from bench_agent.jobs import signing

    assert signing.configured() == pair
    os.chown(pair.store, 0, 0)  # root's (an ansible-made folder) is trusted too
    assert signing.required() == pair
    if grp.getgrgid(os.getegid()).gr_mem in ([], [grp.getgrgid(os.getegid()).gr_name]):
        # writable by a group whose one member is its owner (umask 002 with private groups): no one else
        os.chmod(pair.store, 0o770)
        os.chmod(next(pair.store.iterdir()), 0o660)
        assert signing.required() == pair


@pytest.mark.parametrize("how", ["store g+w", "store o+w", "store nobody's", "cert nobody's", "cert g+w",
                                 "cert symlink", "key readable", "key nobody's", "keys folder g+w",
                                 "parent o+w"])
def test_keys_another_user_could_have_written_are_refused(pair, how):
    from bench_agent.jobs import signing

    crt = next(pair.store.iterdir())
    path = {"store": pair.store, "cert": crt, "key": pair.key, "keys": pair.key.parent,
            "parent": pair.key.parent.parent}[how.split()[0]]
    if how.endswith("g+w"):  # a group that holds another user (nogroup: nobody's)
        os.chown(path, -1, NOBODY)
        os.chmod(path, os.stat(path).st_mode | 0o020)
    elif how.endswith("o+w"):
        os.chmod(path, os.stat(path).st_mode | 0o002)
    elif how.endswith("nobody's"):
        os.chown(path, NOBODY, NOBODY)
    elif how.endswith("readable"):
        os.chmod(path, 0o640)
    elif how.endswith("symlink"):  # a certificate of someone else's, linked in
        other = pair.key.parent.parent / "elsewhere"
        other.mkdir(mode=0o700)
        os.chown(other, NOBODY, NOBODY)
        os.rename(crt, other / "theirs.crt")
        os.symlink(other / "theirs.crt", crt)
    with pytest.raises(Refused) as e:
        signing.required()
    assert str(path) in str(e.value) and "someone else could have written it" in str(e.value)
    assert ("chown" if "nobody" in how else "go-w" if "+w" in how else "go-rwx" if "readable" in how
            else "regular file") in e.value.hint


def test_a_worker_refuses_to_start_with_a_store_others_can_write(pair, tmp_path):
    """The whole road: `panio worker` exits 13 naming the folder and the fix, and serves nothing."""
    from conftest import PANIO

    os.chmod(pair.store, 0o707)
    lab = tmp_path / "lab.toml"
    lab.write_text("")
    env = {**os.environ, "PANIO_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path),
           "PANIO_BROKER": "redis://127.0.0.1:6379/15"}
    r = subprocess.run([PANIO, "worker", "--host", "h9", "--lab", str(lab)], env=env, capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 13, r.stderr
    assert str(pair.store) in r.stderr and f"chmod go-w {pair.store}" in r.stderr, r.stderr


def test_doctor_says_why_the_keys_are_refused(pair):
    from controller.jobs import broker_check

    os.chmod(pair.store, 0o777)
    row = {r["item"]: r for r in broker_check.rows("redis://127.0.0.1:6379/15")}["signing"]
    assert row["status"] == "warning" and f"chmod go-w {pair.store}" in row["detail"], row


def test_keys_init_and_trust_refuse_a_folder_others_can_write(pair, tmp_path):
    from bench_agent.jobs.signing import Keys
    from controller import keys

    os.chmod(pair.store, 0o777)
    with pytest.raises(Refused, match="writable by every user"):
        keys.trust(pair.cert, pair.store, name="again")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, -1, NOBODY)
    os.chmod(shared, 0o775)
    with pytest.raises(Refused, match=str(shared)):
        keys.create("h2", Keys(shared / "k", shared / "c", shared / "t"))
    assert not (shared / "k").exists()


@pytest.fixture
def remote(panio, tmp_path):
    import sys

    from sshd import Sshd

    server = Sshd(tmp_path / "sshd", tmp_path / "home")
    panio("init")
    panio("host", "add", "bench", "--ssh", f"{server.user}@127.0.0.1", "--port", str(server.port),
          "--python", sys.executable)
    panio("target", "add", "far", "--host", "bench")
    yield panio
    server.stop()


def test_a_known_hosts_someone_else_could_write_is_refused(remote, tmp_path):
    """A real sshd: panio's known_hosts (or the user's ~/.ssh/known_hosts) writable by a group holding another
    user, or owned by another user, is refused by a connection and by `panio host trust`; made ours again
    (chmod go-w, chown), it is used."""
    remote("host", "trust", "bench")
    ours = tmp_path / "home" / ".config" / "panio" / "known_hosts"
    assert remote("ping", "far", "--count", "1", "--json").json()["host"] == "bench"
    os.chown(ours, -1, NOBODY)
    os.chmod(ours, 0o664)
    r = remote.fails("ping", "far", code=13)
    assert str(ours) in r.err and f"chmod go-w {ours}" in r.err, r.err
    r = remote.fails("host", "trust", "bench", code=13)
    assert str(ours) in r.err
    os.chmod(ours, 0o644)
    assert remote("ping", "far", "--count", "1", "--json").json()["host"] == "bench"
    user = tmp_path / "home" / ".ssh" / "known_hosts"  # the user's own, someone else's
    user.write_text("")
    os.chown(user, NOBODY, NOBODY)
    r = remote.fails("ping", "far", code=13)
    assert str(user) in r.err and "owned by uid 65534" in r.err and "chown" in r.err, r.err
    os.chown(user, os.geteuid(), os.getegid())
    os.chmod(user.parent, 0o777)  # the folder it is in
    r = remote.fails("ping", "far", code=13)
    assert f"is in {user.parent}, which is writable by every user" in r.err, r.err


def test_panio_setup_does_not_hand_ssh_a_known_hosts_someone_else_could_write(tmp_path, monkeypatch):
    """OpenSSH's client reads a known_hosts whatever its owner: `panio setup` checks before naming it to Ansible."""
    from controller.provision import inventory

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert "StrictHostKeyChecking=yes" in inventory.ssh_args()  # none there yet: nothing to refuse
    (tmp_path / ".ssh").mkdir(mode=0o700)
    planted = tmp_path / ".ssh" / "known_hosts"
    planted.write_text("")
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(Refused, match=str(planted)):
        inventory.ssh_args()


def test_a_lease_store_record_someone_else_wrote_refuses_side_effects(panio, tmp_path, prefix):
    """The host records the real Redis store, a lease is held there; another user who swaps the record for one
    naming no store does not let a power hook through: the guard refuses (13) naming the file, nothing runs."""
    import json

    from bench_agent.leases import redis_store
    from bench_agent.leases.fences import FenceStore
    from peerhelp import SHARED_REDIS

    marks = tmp_path / "marks"
    marks.mkdir()
    panio("init")
    panio("target", "add", "pico")
    panio("power", "set", "-t", "pico", "--on-cmd", f"touch {marks / 'powered'}")
    panio("lease", "store", "--set", SHARED_REDIS, "--prefix", prefix)
    store = redis_store.RedisLeaseStore(SHARED_REDIS, prefix,
                                        FenceStore(f"sqlite:///{tmp_path / 'fences.db'}")).for_lab(panio.lab_key)
    lease = store.try_acquire("pico", {"holder": "worker bench1@ctl:77", "job": 7}, ttl_s=600)
    record = tmp_path / "theirs.json"
    record.write_text(json.dumps({"stores": []}))
    os.chown(record, NOBODY, NOBODY)
    try:
        panio.fails("power", "on", "pico", code=8)  # leased
        os.replace(record, os.path.join(panio.env["PANIO_STATE_DIR"], "lease-stores.json"))
        r = panio.fails("power", "on", "pico", code=13)
        assert "lease-stores.json is owned by uid 65534" in r.err and "every side effect is refused" in r.err, r.err
        assert not list(marks.iterdir()), "a hook ran while the lease was held"
    finally:
        lease.release()


@pytest.mark.parametrize("how", ["file g+w", "file symlink", "folder o+w", "folder o+w, file gone"])
def test_the_lease_store_record_is_checked_when_read_again(tmp_path, how):
    from bench_agent.leases import guard

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = state / guard.RECORD_NAME
    path.write_text('{"stores": [{"url": "redis://127.0.0.1:6379/0", "prefix": "p:"}]}')
    os.chmod(path, 0o600)
    assert [s["url"] for s in guard._recorded(str(state))[1]] == ["redis://127.0.0.1:6379/0"]
    if how == "file g+w":
        os.chown(path, -1, NOBODY)
        os.chmod(path, 0o620)
    elif how == "file symlink":
        os.rename(path, tmp_path / "elsewhere.json")
        os.symlink(tmp_path / "elsewhere.json", path)
    else:
        os.chmod(state, 0o777)
        os.utime(path, ns=(1, 1))  # what a rewrite by someone else changes (or, below, the file gone)
        if how.endswith("gone"):
            path.unlink()
    with pytest.raises(Refused) as e:
        guard._recorded(str(state))
    assert "every side effect is refused" in str(e.value)
    assert e.value.hint.startswith("chmod go-w") or e.value.hint.startswith("remove it"), e.value.hint


@pytest.fixture
def hid_daemon(tmp_path, monkeypatch):
    """A live process whose command line is a HID daemon's of this state directory (what ``processes`` finds),
    and the discovery file its daemon would write: (state, discovery file, pid)."""
    import sys

    from bench_agent.hid.daemon import MODULE, discovery_path
    from bench_agent.private import private_dir, write_private
    from jobhelp import wait_for

    state = tmp_path / "state"
    monkeypatch.setenv("PANIO_STATE_DIR", str(state))
    monkeypatch.delenv("PANIO_LAB_KEY", raising=False)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "-m", MODULE, "--state-dir",
                             str(state), "--target", "t1"])
    wait_for(lambda: open(f"/proc/{proc.pid}/cmdline", "rb").read(), timeout_s=30)  # vfork returns mid-exec
    disc = discovery_path("t1", state)
    private_dir(disc.parent)
    write_private(disc, f'{{"pid": {proc.pid}, "device": "/dev/hidg0"}}'.encode())
    yield state, disc, proc.pid
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("how", ["nobody's", "o+w", "folder o+w", "symlink"])
def test_a_discovery_file_someone_else_could_have_written_counts_as_no_daemon(hid_daemon, how, caplog):
    from bench_agent.daemons import per_target
    from bench_agent.hid.daemon import MODULE

    state, disc, pid = hid_daemon
    assert per_target.discovery(MODULE, disc, "t1")["pid"] == pid  # ours: followed
    if how == "nobody's":
        os.chown(disc, NOBODY, NOBODY)
    elif how == "o+w":
        os.chmod(disc, 0o666)
    elif how == "folder o+w":
        os.chmod(disc.parent, 0o777)
    else:
        os.rename(disc, state / "planted.json")
        os.symlink(state / "planted.json", disc)
    with caplog.at_level("WARNING", logger="panio.daemons"):
        assert per_target.discovery(MODULE, disc, "t1") is None
    assert f"ignoring the discovery file {disc}" in caplog.text
    assert per_target.status(MODULE, disc, "t1")["state"] == "untracked"  # a live daemon, no trusted record


@pytest.mark.parametrize("how", ["nobody's", "o+w", "symlink"])
def test_a_serial_capture_record_someone_else_could_have_written_is_no_capture(tmp_path, how):
    """A serial capture's discovery file names the process `serial stop` signals and `panio-sim down` stops in
    any state directory: one someone else could have written is no capture there."""
    import sys

    from bench_agent.daemons import registry
    from bench_agent.private import private_dir, write_private
    from bench_agent.serial import files
    from jobhelp import wait_for

    state = tmp_path / "state"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "-m", files.SUPERVISOR,
                             "--state-dir", str(state), "--target", "t1"])
    try:
        wait_for(lambda: open(f"/proc/{proc.pid}/cmdline", "rb").read(), timeout_s=30)
        disc = files.discovery_path("t1", state)
        private_dir(disc.parent)
        write_private(disc, f'{{"name": "t1", "pid": {proc.pid}, "device": "/dev/ttyUSB0"}}'.encode())
        assert files.discovery("t1", state)["pid"] == proc.pid  # ours: followed
        assert [d["pid"] for d in registry.daemons_anywhere({"/dev/ttyUSB0"})] == [proc.pid]
        if how == "nobody's":
            os.chown(disc, NOBODY, NOBODY)
        elif how == "o+w":
            os.chmod(disc, 0o666)
        else:
            os.rename(disc, state / "planted.json")
            os.symlink(state / "planted.json", disc)
        assert files.discovery("t1", state) is None
        assert registry.daemons_anywhere({"/dev/ttyUSB0"}) == []
    finally:
        proc.kill()
        proc.wait()


def test_a_file_writable_by_a_shared_group_is_not_trusted_even_when_it_is_our_group(tmp_path):
    """A group-writable file passes only in this user's private group: a primary group other users share (here
    nogroup, nobody's, as this process's group) could have written it."""
    import sys

    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    path = folder / "parsed.json"
    path.write_text("{}")
    os.chmod(path, 0o600)
    script = ("import os, sys; os.setegid(int(sys.argv[2])); from bench_agent.private import trusted_read; "
              "print(trusted_read(sys.argv[1]) is not None)")

    def trusted_as(gid: int) -> bool:
        out = subprocess.run([sys.executable, "-c", script, str(path), str(gid)], capture_output=True, text=True,
                             check=True).stdout
        return out.strip() == "True"

    assert trusted_as(NOBODY)  # ours, 0600: trusted whatever our group
    os.chown(path, -1, NOBODY)
    os.chmod(path, 0o660)
    assert not trusted_as(NOBODY)  # group nogroup can write it, and nobody is in it: not ours alone


def test_the_controllers_app_checks_its_keys_when_it_loads_them_and_again_once_their_mode_changes(pair,
                                                                                                   monkeypatch):
    """The controller makes its Celery app once while its keys stay the same files (each API submission asks for
    it); a change of the keys' content, mode or owner makes it load and check them again."""
    from controller import backends

    monkeypatch.setenv("PANIO_BROKER", "redis://127.0.0.1:1/0")  # never reached: making an app connects nowhere
    first = backends.celery_app()
    assert backends.celery_app() is first  # the same files: neither loaded nor checked again
    os.chmod(pair.store, 0o777)
    with pytest.raises(Refused) as e:
        backends.celery_app()
    assert str(pair.store) in str(e.value)
    os.chmod(pair.store, 0o700)
    assert backends.celery_app() is not first  # loaded and checked once more

"""Notifications to a real local HTTP receiver and a real SMTP server (aiosmtpd): every event, every payload
format, retries, and a receiver that hangs never holds up a job."""

from __future__ import annotations

import email
import email.policy
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jobhelp import job_file, wait_for

PASS = 'target = "pico"\n[[steps]]\nrun = "panio ping ${target}"\n'
FAIL = 'target = "pico"\n[[steps]]\nrun = "panio ping ${target}"\nexpect_output = "never-printed"\n'
LAB_FAIL = 'target = "pico"\n[[steps]]\nrun = "panio serial status ${target}"\n'


@pytest.fixture
def smtp():
    from aiosmtpd.controller import Controller

    class Sink:
        def __init__(self):
            self.mails = []

        async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
            self.mails.append((envelope.rcpt_tos, envelope.content.decode()))
            return "250 OK"

    sink = Sink()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctl = Controller(sink, hostname="127.0.0.1", port=port)
    ctl.start()
    sink.port = port
    yield sink
    ctl.stop()


def notify_lab(panio, receiver, smtp) -> None:
    panio("init")
    panio("target", "add", "pico")
    panio.env["PANIO_NOTIFY_BACKOFF_S"] = "0.1"
    panio.env["HOOK_URL"] = f"{receiver.url}/from-env"
    with panio.lab.open("a") as f:
        f.write(f"""
[[notify]]
name = "chat"
webhook = "{receiver.url}/flaky"
format = "slack"

[[notify]]
webhook = "{receiver.url}/matrix"
format = "matrix"
on = ["job_failed"]

[[notify]]
webhook = "{receiver.url}/teams"
format = "teams"
on = ["health_changed"]

[[notify]]
webhook_env = "HOOK_URL"
on = ["job_incomplete", "suite_finished"]

[[notify]]
name = "ops-mail"
smtp = "127.0.0.1:{smtp.port}"
from = "panio@lab.test"
to = ["ops@lab.test"]
on = ["health_changed", "suite_finished"]
""")


def test_every_event_reaches_webhooks_and_mail_in_each_format_with_retries(panio, tmp_path, receiver, smtp):
    notify_lab(panio, receiver, smtp)
    panio.fails("job", "run", job_file(tmp_path, FAIL, "fail.toml"), code=14)
    panio.fails("job", "run", job_file(tmp_path, LAB_FAIL, "lab.toml2"), code=3)
    panio("target", "health", "pico", "--set", "maintenance", "--reason", "new PSU")
    panio("target", "health", "pico", "--set", "good")
    (tmp_path / "suite.toml").write_text('name = "nightly"\njobs = ["pass.toml"]\n')
    job_file(tmp_path, PASS, "pass.toml")
    panio("suite", "run", str(tmp_path / "suite.toml"))

    slack = [b["text"] for b in receiver.bodies("/flaky")]
    assert receiver.failed_once, "the first delivery failed and was retried"
    assert any("job 1" in t and "failed (the board)" in t for t in slack)
    assert any("job 2" in t and "incomplete (the lab)" in t for t in slack)
    assert any("pico is now maintenance (was unknown): new PSU" in t for t in slack)
    assert any("suite nightly finished: passed (1 of 1 jobs passed)" in t for t in slack)
    assert all(set(b) == {"text"} for b in receiver.bodies("/flaky"))
    matrix = receiver.bodies("/matrix")
    assert len(matrix) == 1 and matrix[0]["msgtype"] == "m.text" and "job 1" in matrix[0]["body"]
    teams = receiver.bodies("/teams")
    assert [t["@type"] for t in teams] == ["MessageCard", "MessageCard"]
    assert teams[0]["themeColor"] == "D70000" and teams[1]["themeColor"] == "2EB886"
    plain = receiver.bodies("/from-env")
    assert [b["event"] for b in plain] == ["job_incomplete", "suite_finished"]
    assert plain[0]["job_id"] == 2 and plain[0]["target"] == "pico" and plain[0]["health"] == "incomplete"
    assert plain[1]["jobs"][0]["result"] == "passed" and plain[1]["verdict"] == "passed"
    wait_for(lambda: len(smtp.mails) == 3, 10)
    subjects = [m.split("Subject: ", 1)[1].splitlines()[0] for _, m in smtp.mails]
    assert [rcpt for rcpt, _ in smtp.mails] == [["ops@lab.test"]] * 3
    assert "now maintenance" in subjects[0] and "now good" in subjects[1] and "suite nightly" in subjects[2]


def test_a_hanging_receiver_never_holds_up_the_job(panio, tmp_path):
    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(8)  # accepts connections (the kernel does) and never answers
    try:
        panio("init")
        panio("target", "add", "pico")
        with panio.lab.open("a") as f:
            f.write(f'\n[[notify]]\nwebhook = "http://127.0.0.1:{hang.getsockname()[1]}/x"\nretries = 0\n')
        start = time.monotonic()
        panio.fails("job", "run", job_file(tmp_path, FAIL), code=14)
        took_s = time.monotonic() - start
        job = panio("job", "status", "1", "--json").json()
        assert job["finished_at"] - job["started_at"] < 4, "the verdict is recorded before any delivery"
        assert took_s < 15, "a process waits at most DRAIN_S (10 s) at exit for its notifications"
    finally:
        hang.close()


def test_a_notify_table_is_checked_like_the_rest_of_the_lab(panio):
    panio("init")
    with panio.lab.open("a") as f:
        f.write('\n[[notify]]\nwebhook = "ftp://x"\n')
    assert "http:// or https://" in panio.fails("target", "list", code=5).err
    panio.lab.write_text('[[notify]]\nsmtp = "mail:25"\n')
    assert "needs 'to'" in panio.fails("target", "list", code=5).err
    panio.lab.write_text('[[notify]]\nwebhook = "http://x"\non = ["job_done"]\n')
    assert "must be one of suite_finished" in panio.fails("target", "list", code=5).err


def test_a_job_whose_worker_died_is_told_and_its_target_becomes_unknown(tmp_path, receiver):
    from bench_agent.health.state import HealthStore
    from bench_agent.leases.file_store import FileLeaseStore
    from bench_agent.jobs.reconcile import Reconciler, dead_after_s
    from bench_agent.results.store import ResultStore

    url = f"sqlite:///{tmp_path / 'r.db'}"
    store, health = ResultStore(url), HealthStore(url)
    health.set("t", "good", "checked", "test")
    spec = {"lease_ttl_s": 2, "notify": [{"webhook": f"{receiver.url}/hook"}],
            "steps": [{"name": "a", "command": "panio ping t"}]}
    job_id = store.create_job("j", "t", "h", spec)
    assert store.take(job_id, "worker h@another-machine:4242", 0) and store.claim(job_id, "worker h@another-machine:4242")
    store.set_fence(job_id, 7)
    with store.engine.begin() as c:
        c.execute(store.jobs.update().where(store.jobs.c.id == job_id).values(beat_at=time.time() - dead_after_s(spec) - 1))
    Reconciler(store, FileLeaseStore(tmp_path / "leases")).pass_()
    assert store.job(job_id)["health"] == "incomplete"
    assert health.get("t")["health"] == "unknown" and health.get("t")["set_by"] == "reconciler"
    wait_for(lambda: len(receiver.bodies("/hook")) == 2, 10)
    assert sorted(b["event"] for b in receiver.bodies("/hook")) == ["health_changed", "job_incomplete"]


def test_a_health_check_the_lab_stopped_is_told_as_job_incomplete(panio, tmp_path, receiver):
    """Issue 27, item 4: a health check that ends incomplete is told like any job the lab stopped; one the
    board failed is told as the target's health change only."""
    panio("init")
    panio("target", "add", "pico")
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "lab.toml").write_text(
        'name = "pico-health"\n[[steps]]\nname = "capture answers"\nrun = "panio serial status ${target}"\n')
    (tmp_path / "checks" / "board.toml").write_text(
        'name = "pico-health"\n[[steps]]\nname = "answers"\nrun = "panio ping ${target}"\nexpect_output = "NEVER"\n')
    with panio.lab.open("a") as f:
        f.write(f'\n[targets.pico.health_check]\njob = "checks/lab.toml"\n\n[[notify]]\nwebhook = "{receiver.url}/w"\n')
    panio.fails("target", "health", "pico", "--check", code=3)  # not_configured: pico has no serial interface
    wait_for(lambda: len(receiver.bodies("/w")) == 2, 10)
    told = {b["event"]: b for b in receiver.bodies("/w")}
    assert set(told) == {"job_incomplete", "health_changed"}
    assert told["job_incomplete"]["job_id"] == 1 and told["job_incomplete"]["kind"] == "health_check"
    assert told["job_incomplete"]["text"].startswith("panio: health check job 1 pico-health on pico incomplete (the lab)")
    assert told["health_changed"]["health"] == "bad"
    panio.lab.write_text(panio.lab.read_text().replace("checks/lab.toml", "checks/board.toml"))
    panio.fails("target", "health", "pico", "--check", code=14)
    panio("target", "health", "pico", "--set", "maintenance", "--reason", "cable")
    wait_for(lambda: len(receiver.bodies("/w")) == 3, 10)
    assert [b["event"] for b in receiver.bodies("/w")][2:] == ["health_changed"]


def test_a_failed_job_is_mailed_with_its_triage_in_a_one_line_subject(panio, tmp_path, smtp):
    """Issue 45: a failed job's text carries its triage on a second line; EmailMessage refuses a line break in
    the Subject, so every e-mail for a failed job was given up. The subject is now the text on one line."""
    panio("init")
    panio("target", "add", "pico")
    with panio.lab.open("a") as f:
        f.write(f'\n[[notify]]\nsmtp = "127.0.0.1:{smtp.port}"\nto = ["ops@lab.test"]\non = ["job_failed"]\n'
                'retries = 0\n')
    panio.fails("job", "run", job_file(tmp_path, FAIL, "fail.toml"), code=14)
    wait_for(lambda: len(smtp.mails) == 1, 10)
    mail = email.message_from_string(smtp.mails[0][1], policy=email.policy.default)
    assert mail["Subject"].startswith("panio: job 1 ") and "failed (the board)" in mail["Subject"]
    assert "triage:" in mail["Subject"] and "\n" not in mail["Subject"]
    assert "\ntriage:" in mail.get_content()  # the body keeps the lines


def test_a_line_break_in_a_subject_cannot_add_a_header_or_a_recipient(smtp):
    from bench_agent.jobs import notify

    text = "panio: job 9 x on pico failed (the board): boom\r\nBcc: thief@elsewhere.test\nX-Evil: 1"
    notify._mail({"smtp": f"127.0.0.1:{smtp.port}", "to": ["ops@lab.test"]}, {"event": "job_failed", "text": text})
    (rcpt, content), = smtp.mails
    mail = email.message_from_string(content, policy=email.policy.default)
    assert rcpt == ["ops@lab.test"] and mail["Bcc"] is None and mail["X-Evil"] is None
    assert mail["Subject"] == "panio: job 9 x on pico failed (the board): boom Bcc: thief@elsewhere.test X-Evil: 1"


class _Recorder:
    """An HTTP server on loopback that records every request (method, path) and answers ``status`` with
    ``location``."""

    def __init__(self, status: int, location: str = "") -> None:
        self.requests: list[tuple[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self):
                outer.requests.append((self.command, self.path))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = do_HEAD = _any  # noqa: N815 - http.server's names

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_webhook_that_redirects_is_a_failed_delivery_and_the_redirect_is_not_followed(caplog):
    """Issue 45: urllib followed a 302, so a webhook could send panio's request to an internal address (here a
    second server, which must hear nothing). A 3xx is now a failed delivery, logged."""
    from bench_agent.jobs import notify

    internal = _Recorder(200)
    hook = _Recorder(302, f"{internal.url}/admin/reset")
    try:
        with caplog.at_level(logging.WARNING, logger="panio.notify"):
            notify.send([{"name": "chat", "webhook": f"{hook.url}/hook", "retries": 0}], "health_changed",
                        {"target": "pico", "health": "bad", "previous": "good", "reason": "x"})
            assert notify.drain(10)
        assert hook.requests == [("POST", "/hook")]
        assert internal.requests == []
        given_up = [r.getMessage() for r in caplog.records if "given up" in r.getMessage()]
        assert len(given_up) == 1 and "302" in given_up[0] and "not followed" in given_up[0], given_up
    finally:
        hook.close()
        internal.close()

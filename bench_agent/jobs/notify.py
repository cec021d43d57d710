"""Notifications: webhooks (a JSON POST) and e-mail (SMTP), sent in the background, retried, bounded.

Configured in the lab file (``[[notify]]``, see docs/operations.md) and carried
in a job's payload, so a worker with no lab file notifies too. Events:

    suite_finished   a suite run ended (every job's verdict; a failed job's triage)
    job_failed       a job ended complete, failed (the board failed); carries its triage
                     (``triage``, ``first_divergent_line``, ``last_pass``, ``flaky``: docs/triage.md)
    job_incomplete   a job ended incomplete (the lab failed)
    health_changed   a target's health changed (good, bad, maintenance, unknown)

A notification never blocks a job: ``send`` only queues it. One sender thread
per process delivers, retrying each failed delivery ``retries`` times with a
growing pause; the queue holds at most ``QUEUE_MAX`` messages (the oldest are
dropped beyond that). A message given up or dropped is a warning on the
``panio.notify`` logger. A short-lived process (``panio job run``) waits at
most ``DRAIN_S`` at exit for what it queued.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import threading
import time
from typing import Any, Callable

EVENTS = ("suite_finished", "job_failed", "job_incomplete", "health_changed")
FORMATS = ("json", "slack", "matrix", "teams")
QUEUE_MAX = 200
DRAIN_S = 10.0
ATTEMPT_TIMEOUT_S = 5.0
DEFAULT_RETRIES = 3
BACKOFF_S = float(os.environ.get("PANIO_NOTIFY_BACKOFF_S", "1.0"))  # first pause between attempts; doubles

_lock = threading.Lock()
_queue: queue.Queue | None = None
_log = logging.getLogger("panio.notify")
_log.addHandler(logging.NullHandler())  # a CLI command stays quiet on stderr; a worker's logging shows it


def wanted(configs: list[dict] | None, event: str) -> bool:
    """Does any configured channel want ``event``?"""
    return any(event in c.get("on", EVENTS) for c in configs or [])


def send(configs: list[dict] | None, event: str, data: dict[str, Any]) -> int:
    """Queue ``event`` for every configured channel that wants it; returns how many were queued."""
    wanted = [c for c in configs or [] if event in c.get("on", EVENTS)]
    if not wanted:
        return 0
    message = {"event": event, "text": summary(event, data), "at": time.time(), **data}
    q = _sender()
    for config in wanted:
        while True:
            try:
                q.put_nowait((config, message))
                break
            except queue.Full:
                try:
                    dropped = q.get_nowait()
                    q.task_done()
                    _log.warning("notification dropped (queue full): %s", dropped[1]["text"])
                except queue.Empty:
                    pass
    return len(wanted)


def job_ended(payload: dict, summary: dict[str, Any], deliver: Callable[..., Any] | None = None) -> None:
    """Tell the job's channels (``payload["notify"]``) how it ended, when that is news: incomplete, or the board
    failed. A health check that failed or was held for the lab is told as its target's health instead.
    ``deliver(configs, event, data)`` sends it (default ``send``; the runner holds it until the log is stored)."""
    event = {"incomplete": "job_incomplete"}.get(summary["health"])
    if summary["health"] == "complete" and summary["result"] == "failed":
        event = "job_failed"
    if payload.get("kind") == "health_check" and (event == "job_failed" or summary.get("gated")):
        return
    if event:
        (deliver or send)(payload.get("notify"), event, {"job_id": summary["job_id"], "name": payload["name"],
                                            "target": payload["target"], "health": summary["health"],
                                            "result": summary["result"], "reason": summary["reason"],
                                            "kind": payload.get("kind") or "job",
                                            "fault": "skipped" if summary.get("gated") else
                                            "board" if event == "job_failed" else "lab"})


def drain(timeout_s: float = DRAIN_S) -> bool:
    """Wait up to ``timeout_s`` for queued notifications to be delivered (or given up); True if all were."""
    q = _queue
    if q is None:
        return True
    end = time.monotonic() + timeout_s
    while q.unfinished_tasks and time.monotonic() < end:
        time.sleep(0.05)
    return not q.unfinished_tasks


def _sender() -> queue.Queue:
    global _queue
    with _lock:
        if _queue is None:
            _queue = queue.Queue(QUEUE_MAX)
            threading.Thread(target=_loop, args=(_queue,), name="panio-notify", daemon=True).start()
            atexit.register(drain)
    return _queue


def _loop(q: queue.Queue) -> None:
    while True:
        config, message = q.get()
        try:
            _deliver(config, message)
        finally:
            q.task_done()


def _deliver(config: dict, message: dict) -> None:
    retries = int(config.get("retries", DEFAULT_RETRIES))
    for attempt in range(retries + 1):
        try:
            if config.get("smtp"):
                _mail(config, message)
            else:
                _post(config, message)
            return
        except Exception as exc:  # noqa: BLE001 - any delivery failure is retried, then logged, never raised
            error = f"{config.get('name', 'notify')}: {type(exc).__name__}: {exc}"
        if attempt < retries:
            time.sleep(BACKOFF_S * 2 ** attempt)
    _log.warning("notification %s given up after %d attempts: %s", message["event"], retries + 1, error)


def summary(event: str, d: dict[str, Any]) -> str:
    if event == "health_changed":
        return f"panio: target {d['target']} is now {d['health']} (was {d['previous']}): {d.get('reason') or ''}"
    if event == "suite_finished":
        text = f"panio: suite {d['suite']} finished: {d['verdict']} ({d['passed']} of {d['total']} jobs passed)"
        return text + "".join(f"\n- job {j['id']} {j['name']} on {j['target']}: {_whose(j)}"
                              f"{j.get('triage') or j.get('reason') or ''}"
                              for j in d.get("jobs", []) if j.get("triage") or j.get("fault"))
    what = "failed (the board)" if event == "job_failed" else "incomplete (the lab)"
    if d.get("fault") == "skipped":  # held by its board's health (bad, maintenance): not the lab's failure
        what = "skipped (its board is held)"
    job = "health check job" if d.get("kind") == "health_check" else "job"
    text = f"panio: {job} {d['job_id']} {d['name']} on {d['target']} {what}: {d.get('reason') or ''}"
    return text + (f"\ntriage: {d['triage']}" if d.get("triage") else "")


def _whose(job: dict) -> str:
    """What a suite's job's line says first: whose fault it was (the board, the lab) or that it was skipped."""
    return {"board": "failed (the board): ", "lab": "incomplete (the lab): ",
            "skipped": "skipped (its board is held): "}.get(job.get("fault") or "", "")


def body(config: dict, message: dict) -> dict:
    """The JSON document POSTed for ``config['format']``."""
    fmt, text = config.get("format", "json"), message["text"]
    if fmt == "slack":  # Slack incoming webhooks (also Mattermost, Rocket.Chat)
        return {"text": text}
    if fmt == "matrix":  # a Matrix m.room.message content; matrix-hookshot's generic webhooks read "text"
        return {"msgtype": "m.text", "body": text, "text": text}
    if fmt == "teams":  # an Office 365 connector MessageCard
        bad = message["event"] in ("job_failed", "job_incomplete") or message.get("health") in ("bad", "maintenance")
        return {"@type": "MessageCard", "@context": "https://schema.org/extensions", "summary": text,
                "themeColor": "D70000" if bad else "2EB886", "title": f"panio: {message['event']}", "text": text}
    return message


def _url(config: dict) -> str:
    if config.get("webhook_env"):
        url = os.environ.get(config["webhook_env"])
        if not url:
            raise LookupError(f"${config['webhook_env']} is not set")
        return url
    return config["webhook"]


def _post(config: dict, message: dict) -> None:
    """POST the message; any answer but 2xx is a failed delivery. A redirect is never followed: the lab file
    names the receiver, and a 302 must not send panio's request to an address it never named (an internal one)."""
    import urllib.error
    import urllib.request

    data = json.dumps(body(config, message)).encode()
    req = urllib.request.Request(_url(config), data=data, method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "panio-notify"})
    try:
        with _opener().open(req, timeout=ATTEMPT_TIMEOUT_S) as resp:  # http(s) only (the lab schema checks)
            if resp.status >= 300:
                raise OSError(f"HTTP {resp.status}")
    except urllib.error.HTTPError as err:
        if 300 <= err.code < 400:
            raise OSError(f"HTTP {err.code} (a redirect to {err.headers.get('Location', '?')!r}, not followed)") \
                from None
        raise


def _one_line(text: str) -> str:
    """``text`` with every run of white space (CR, LF and the other line breaks included) as one space: a header
    value holds no line break (EmailMessage refuses one, so the mail was never sent), and none can start a
    header of its own."""
    return " ".join(text.split())


def _opener():
    """urlopen's opener (the environment's proxies included) that never follows a redirect."""
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None  # urllib then raises the 3xx as an HTTPError

    return urllib.request.build_opener(NoRedirect)


def _mail(config: dict, message: dict) -> None:
    import smtplib
    from email.message import EmailMessage

    host, _, port = config["smtp"].rpartition(":") if ":" in config["smtp"] else (config["smtp"], "", "25")
    mail = EmailMessage()
    mail["Subject"] = _one_line(message["text"])[:200]  # a failed job's text has its triage on a second line
    mail["From"] = config.get("from", "panio@localhost")
    mail["To"] = ", ".join(config["to"])
    mail.set_content(message["text"] + "\n\n" + json.dumps(message, indent=2, default=str) + "\n")
    with smtplib.SMTP(host, int(port), timeout=ATTEMPT_TIMEOUT_S) as smtp:
        if config.get("starttls"):
            smtp.starttls()
        if config.get("username"):
            smtp.login(config["username"], os.environ.get(config.get("password_env", ""), ""))
        smtp.send_message(mail)

"""The Dispatcher, with the StubTransport the package ships: the one road to a transport.

What travels (checked arguments, the spec's deadline), what is refused before
it travels (bad values; side effects on a target someone else leases), what
passes while leased (reads), and how failures come back (outcome unknown for
side effects only, stray exceptions translated).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench_agent.errors import Busy, InternalError, Refused, Timeout, Unreachable, UsageError
from bench_agent.leases.file_store import FileLeaseStore
from controller.dispatch import Dispatcher
from controller.lab.model import Lab
from controller.transports.stub import StubTransport

LAB = Lab(Path("lab.toml"), {"targets": {"pico": {"serial": [{"name": "console", "device": "/dev/null"}]}}})
IFACE = {"name": "console", "device": "/dev/null"}


@pytest.fixture
def leases(tmp_path):
    return FileLeaseStore(tmp_path / "leases")


def _dispatcher(leases, handler=lambda request: {"echo": request["op"]}, **kw):
    stub = StubTransport(handler, **kw)
    return Dispatcher(LAB, transport=stub, leases=leases), stub


def test_request_carries_checked_args_and_the_specs_deadline(leases):
    d, stub = _dispatcher(leases)
    d.call("pico", "serial.wait", {"target": "pico", "iface": IFACE, "epoch": 1, "since": 0, "timeout_ms": 4500})
    d.call("pico", "action.run", {"target": "pico", "name": "flash", "command": "true", "timeout_s": None})
    d.call("pico", "power.cycle", {"target": "pico", "power": {"cycle_cmd": "x", "timeout_s": 7}})
    wait, action, cycle = stub.requests
    assert wait["deadline_s"] == 4.5 and wait["args"]["iface"] == IFACE  # channel config passes through
    assert action["deadline_s"] == 600.0  # an action without timeout_s: its default
    assert cycle["deadline_s"] == 2 * 7 + 2.0  # off and on hooks plus the pause


@pytest.mark.parametrize("op,args,word", [
    ("serial.wait", {"epoch": 1, "since": 0, "timeout_ms": 3_600_001}, "timeout_ms must be from 0 to 3600000 ms"),
    ("serial.wait", {"epoch": 1, "since": -1}, "since must be at least 0"),
    ("serial.send", {"text": "x", "pace_ms": True}, "pace_ms must be a whole number"),
    ("action.run", {"name": "a", "command": "true", "timeout_s": float("nan")}, "finite"),
    ("serial.dtr", {"ms": 0}, "ms must be from 1 to 60000 ms"),
])
def test_bad_arguments_never_travel(leases, op, args, word):
    d, stub = _dispatcher(leases)
    with pytest.raises(UsageError, match=word):
        d.call("pico", op, {"target": "pico", "iface": IFACE, **args})
    assert stub.requests == []


def test_a_leased_target_refuses_side_effects_naming_the_holder_and_allows_reads(leases):
    d, stub = _dispatcher(leases)
    lease = leases.try_acquire("pico", {"holder": "job-runner@bench:42", "job": 7}, 30)
    try:
        for op, args in [("serial.send", {"text": "reboot"}), ("power.cycle", {}), ("serial.reset", {}),
                         ("action.run", {"name": "flash", "command": "true"}), ("serial.connect", {})]:
            with pytest.raises(Busy) as info:
                d.call("pico", op, {"target": "pico", "iface": IFACE, **args})
            assert info.value.details["holder"] == "job-runner@bench:42" and info.value.details["job"] == 7
        assert stub.requests == []
        for op, args in [("serial.log", {}), ("serial.status", {}), ("serial.evidence", {}), ("power.state", {}),
                         ("serial.wait", {"epoch": 1, "since": 0}), ("system.ping", {"payload": 1})]:
            assert d.call("pico", op, {"target": "pico", "iface": IFACE, **args}) == {"echo": op}
    finally:
        lease.release()
    assert d.call("pico", "serial.send", {"target": "pico", "iface": IFACE, "text": "x"}) == {"echo": "serial.send"}


def test_host_calls_are_not_lease_checked(leases):
    d, stub = _dispatcher(leases)
    lease = leases.try_acquire("pico", {"holder": "h"}, 30)
    try:
        assert d.call_host(None, "daemons.stop", {"names": ["serial-x"]}) == {"echo": "daemons.stop"}
    finally:
        lease.release()


def test_interactive_operations_take_the_transports_byte_channel(leases):
    d, stub = _dispatcher(leases, interactive=lambda request: "terminal closed")
    assert d.call("pico", "serial.connect", {"target": "pico", "iface": IFACE}) == "terminal closed"
    assert stub.requests[0]["interactive"] is True


def test_celery_refuses_an_interactive_operation():
    from controller.transports.celery import CeleryTransport

    transport = CeleryTransport.__new__(CeleryTransport)  # no broker needed to refuse
    transport.host = "bench2"
    with pytest.raises(Refused, match="byte stream serial.connect needs"):
        Dispatcher(LAB, transport=transport, leases=None).call_host(
            "bench2", "serial.connect", {"target": "pico", "iface": IFACE})


def _raiser(err):
    def handler(request):
        raise err

    return handler


@pytest.mark.parametrize("op,args,unknown", [
    ("power.off", {"power": {"off_cmd": "x"}}, True), ("serial.send", {"text": "x"}, True),
    ("power.state", {}, False), ("serial.log", {}, False),
])
@pytest.mark.parametrize("error", [Timeout, Unreachable])
def test_outcome_unknown_only_for_side_effects(leases, op, args, unknown, error):
    d, _ = _dispatcher(leases, _raiser(error("no answer")))
    with pytest.raises(error) as info:
        d.call("pico", op, {"target": "pico", "iface": IFACE, **args})
    assert (info.value.details.get("outcome") == "unknown") is unknown
    assert ("outcome is unknown" in (info.value.hint or "")) is unknown
    if unknown and op.startswith("power."):
        assert "panio power-state pico" in info.value.hint


def test_a_side_effect_that_knows_nothing_happened_is_not_called_unknown(leases):
    d, _ = _dispatcher(leases, _raiser(Unreachable("HID rig /dev/ttyNOPE: no such file", outcome="none")))
    with pytest.raises(Unreachable) as info:
        d.call("pico", "hid.send", {"target": "pico", "hid": {"device": "/dev/ttyNOPE"}, "command": ["key", "a"]})
    assert info.value.details["outcome"] == "none" and "outcome is unknown" not in (info.value.hint or "")
    d, _ = _dispatcher(leases, _raiser(Unreachable("link adapter gone")))
    with pytest.raises(Unreachable) as info:  # the hint names the command to retry, not the operation
        d.call("pico", "netif.down_hard", {"target": "pico", "netif": {"interface": "eth1"}})
    assert "before retrying `panio netif down-hard`" in info.value.hint


def test_a_hid_rig_that_cannot_be_opened_sent_nothing(tmp_path):
    from bench_agent.hid.backends.ch9329 import Ch9329Backend

    with pytest.raises(Unreachable) as info:
        Ch9329Backend(str(tmp_path / "no-such-rig"))
    assert info.value.details["outcome"] == "none"


def test_a_transports_stray_exception_is_translated_once(leases):
    d, _ = _dispatcher(leases, _raiser(KeyError("boom")))
    with pytest.raises(InternalError, match="system.ping: KeyError") as info:
        d.call("pico", "system.ping", {"payload": 1})
    assert isinstance(info.value.__cause__, KeyError)  # the cause is kept for PANIO_DEBUG


def test_the_stub_runs_the_real_operation_without_a_handler(leases):
    stub = StubTransport()
    d = Dispatcher(LAB, transport=stub, leases=leases)
    assert d.call("pico", "system.ping", {"payload": [1, "a"]}) == {"pong": [1, "a"]}
    d.close()


def test_transports_are_opened_once_per_host_and_closed_with_the_dispatcher(leases):
    with Dispatcher(LAB, leases=leases) as d:
        local = d.transport_for(None)
        assert d.transport_for(None) is local
        assert d.call("pico", "system.ping", {"payload": 3}) == {"pong": 3}
    assert d._open == {}

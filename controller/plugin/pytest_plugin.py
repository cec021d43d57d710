"""pytest hooks and fixtures: ``--panio-lab``, ``--panio-target``, ``--panio-targets``; ``panio_target``.

Loaded in every pytest run of an environment where panio is installed (the
``pytest11`` entry point), so it imports nothing of panio until one of its
options is given, and without them it only adds its options and fixtures.

* ``--panio-target NAME``: the ``panio_target`` fixture is that target;
* ``--panio-targets SELECTOR``: every test that uses ``panio_target`` runs
  once per matching target (``test_boot[board0]``, ``test_boot[board1]``);
* each target is leased for the whole session (``controller.plugin.session``);
* under pytest-xdist every worker is its own session, so each test that uses
  ``panio_target`` is in the xdist group named after its target (its
  parameter id names the target even with ``--panio-target``), and
  ``--dist loadgroup`` (the default under ``-n`` here; another ``--dist`` is
  refused) keeps a target's tests on one worker, the only one that leases it
  (``controller.plugin.xdist_scheduling``);
* each such test's JUnit ``<properties>`` name the target, its host and
  panio's version (``panio_target``, ``panio_host``, ``panio_version``).
"""

from __future__ import annotations

import pytest

_SESSION = pytest.StashKey()  # the PluginSession, when a target option was given
_NAMES = pytest.StashKey()  # the selected target names


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("panio", "panio hardware targets (see docs/pytest-plugin.md)")
    group.addoption("--panio-lab", metavar="LAB", default=None,
                    help="the panio lab file (default: PANIO_LAB, else ~/.config/panio/lab.toml)")
    group.addoption("--panio-target", metavar="TARGET", default=None,
                    help="run the tests on this target (the panio_target fixture)")
    group.addoption("--panio-targets", metavar="SELECTOR", default=None,
                    help="run each test once per matching target: tag:TAG[,tag:TAG], NAME[,NAME] or '*'")
    group.addoption("--panio-lease-wait", metavar="S", type=_wait_s, default=60.0,
                    help="wait up to S seconds for a target another holder leases (default 60)")
    group.addoption("--panio-no-watch", action="store_true", default=False,
                    help="do not start serial capture on the leased targets")
    group.addoption("--panio-ignore-health", action="store_true", default=False,
                    help="drive targets that are bad or in maintenance too (by default their tests are skipped)")


def _wait_s(text: str) -> float:
    import argparse
    import math

    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise argparse.ArgumentTypeError(f"seconds (0 or more), not {text!r}")
    return seconds


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config):
    # runs before xdist's own hook, which turns -n's implied "no" into "load" (tests of one target on every worker)
    if _wants_target(config) and getattr(config.option, "numprocesses", None) and config.option.dist == "no":
        config.option.dist = "loadgroup"
    return (yield)


def pytest_configure(config: pytest.Config) -> None:
    one, many = config.getoption("panio_target"), config.getoption("panio_targets")
    if one is None and many is None:
        return
    if one is not None and many is not None:
        raise pytest.UsageError("panio: give --panio-target or --panio-targets, not both")
    dist = getattr(config.option, "dist", "no")
    if dist not in ("no", "loadgroup") and not _is_xdist_worker(config):
        raise pytest.UsageError(f"panio: --dist {dist} would split a target's tests over workers that each wait "
                                "for its lease; use --dist loadgroup (the default with -n) or leave --dist out")
    from bench_agent.errors import PanioError
    from controller.lab import load
    from controller.paths import resolve_lab_path
    from controller.plugin.session import PluginSession, select

    lab_path, _ = resolve_lab_path(config.getoption("panio_lab"))
    try:
        names = [one] if one is not None else select(load(lab_path), many)
        worker = config.workerinput["workerid"] if _is_xdist_worker(config) else None
        config.stash[_SESSION] = PluginSession(lab_path, names, config.getoption("panio_lease_wait"),
                                               watch=not config.getoption("panio_no_watch"),
                                               holder=f"pytest-{worker}" if worker else "pytest")
    except PanioError as err:
        raise pytest.UsageError(err.human()) from None
    config.stash[_NAMES] = names


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None:
        session.close()


def pytest_report_header(config: pytest.Config) -> str | None:
    session = config.stash.get(_SESSION, None)
    if session is None:
        return None
    return f"panio {_version()}: lab {session.lab.path}, targets {', '.join(session.names)}"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.config.stash.get(_NAMES, None)
    many = metafunc.config.getoption("panio_targets") or _is_xdist_worker(metafunc.config)  # the id names the target
    if names and many and "panio_target" in metafunc.fixturenames:
        metafunc.parametrize("panio_target", names, indirect=True, ids=names, scope="session")


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    session = config.stash.get(_SESSION, None)
    if session is None:
        return
    version = _version()
    for item in items:
        if "panio_target" not in getattr(item, "fixturenames", ()):
            continue
        callspec = getattr(item, "callspec", None)
        name = callspec.params["panio_target"] if callspec and "panio_target" in callspec.params else session.names[0]
        host = session.lab.target(name).get("host") or "local"
        item.user_properties.extend([("panio_target", name), ("panio_host", host), ("panio_version", version)])
        if _is_xdist_worker(config):
            _join_target_group(item, name)


def _join_target_group(item: pytest.Item, name: str) -> None:
    """Put ``item`` in the xdist group ``name``: with ``--dist loadgroup`` one worker runs (and leases) that target."""
    item.add_marker(pytest.mark.xdist_group(name), append=False)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before xdist's own choice of scheduler
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    session = config.stash.get(_SESSION, None)
    if session is None or config.getvalue("dist") != "loadgroup":
        return None
    from controller.plugin.xdist_scheduling import TargetGroupScheduling

    return TargetGroupScheduling(config, log, session.names)


@pytest.fixture(scope="session")
def panio_lab(pytestconfig: pytest.Config):
    """The lab (``controller.lab.Lab``) the session's targets come from."""
    return _session(pytestconfig).lab


@pytest.fixture(scope="session")
def panio_target(request: pytest.FixtureRequest):
    """The leased target (``controller.plugin.handles.PanioTarget``): ``.serial``, ``.power``, ``.video``, ``.hid``."""
    session = _session(request.config)
    name = getattr(request, "param", session.names[0])
    from bench_agent.errors import PanioError

    try:
        unhealthy = None if request.config.getoption("panio_ignore_health") else session.unhealthy(name)
        if unhealthy is None:
            return session.target(name)
    except PanioError as err:
        failure = err.human()
    else:  # LAVA's lesson, as jobs keep it: no test runs on a board the lab cannot vouch for
        pytest.skip(f"panio: target {name} is {unhealthy}: its tests are skipped "
                    "(lift it with `panio target health`, or run with --panio-ignore-health)")
    pytest.fail(failure, pytrace=False)  # outside the except: no "During handling of the above exception"


def _wants_target(config: pytest.Config) -> bool:
    return config.getoption("panio_target") is not None or config.getoption("panio_targets") is not None


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _session(config: pytest.Config):
    session = config.stash.get(_SESSION, None)
    if session is None:
        pytest.fail("panio: no target for this test: run pytest with --panio-target NAME or "
                    "--panio-targets SELECTOR (see docs/pytest-plugin.md)", pytrace=False)
    return session


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("panio")
    except PackageNotFoundError:
        return "unknown"

"""``[targets.NAME.profile]``: what a board looks like when it works, for checks that must recognise it.

Not a channel: nothing here drives the board. The eval suite's hardware tier (``panio-eval hardware``)
reads it to know the board's shell prompt, what its screen shows once up, and how its setup menu opens,
instead of assuming panio's simulated board. Validated with the rest of the lab file (``schema``).

    prompt       regex   its shell prompt on the serial console ("root@sim:~# ", "zeta> ")
    screen_text  regex   text its screen shows once it is up (matched on OCR text)
    setup_key    key, or a list of keys   HID key names pressed in order to open its setup menu ("F2",
                                          ["ENTER", "F2"]); absent: the board has no setup menu
    setup_cue    regex   what the console prints while the setup key is taken ("Press F2", "Hit any key")
    setup_text   regex   text its screen shows in the setup menu ("Setup Utility")
"""

from __future__ import annotations

from controller.lab.fields import Field, Problem, TableSpec, _dotted, _nonempty_string

TYPE_CHECKING = False  # avoid importing typing at start-up (see benchmarks/startup.py)

if TYPE_CHECKING:
    from typing import Any

    from controller.lab.fields import KeyPath

SETUP_KEYS = ("setup_key", "setup_cue", "setup_text")
MAX_REGEX = 500


def _regex(path: KeyPath, value: Any) -> None:
    """A Python regular expression that compiles, short, single-line, and free of ``${``: the eval suite puts
    it into job steps, where ``${name}`` is a captured variable."""
    _nonempty_string(path, value)
    if len(value) > MAX_REGEX:
        raise Problem(path, f"{_dotted(path)} is {len(value)} characters long: at most {MAX_REGEX}")
    if any(ch in value for ch in "\n\r\0"):
        raise Problem(path, f"{_dotted(path)} must be one line (write a line break as \\n)")
    if "${" in value:
        raise Problem(path, f"{_dotted(path)} = {value!r}: '${{' reads as a job variable; write \\$\\{{ to match it")
    from bench_agent import patterns
    from bench_agent.errors import UsageError

    try:  # as a job step matches it: Python's syntax, bounded, tried on inputs that make a bad one backtrack
        patterns.check(value)
    except UsageError as err:
        raise Problem(path, f"{_dotted(path)} is not a regular expression panio can use: {err.message}; escape literal characters such as $ ( [ with a "
                            "backslash") from None


def _key(path: KeyPath, value: Any) -> None:
    from bench_agent.errors import UsageError
    from bench_agent.hid.channel import parse_combo

    _nonempty_string(path, value)
    try:
        parse_combo(value)
    except UsageError:
        raise Problem(path, f"{_dotted(path)} = {value!r} is not a key panio's HID can press: use ENTER, ESC, "
                            "F1..F12, DEL, a..z, 0..9 or a combination such as ctrl+alt+del (docs/hid.md)") from None


def _keys(path: KeyPath, value: Any) -> None:
    if isinstance(value, list):
        if not 1 <= len(value) <= 8:
            raise Problem(path, f"{_dotted(path)} must list 1 to 8 keys, not {len(value)}")
        for i, item in enumerate(value):
            _key(path + (i,), item)
        return
    if not isinstance(value, str):
        raise Problem(path, f"{_dotted(path)} must be a key name or a list of key names")
    _key(path, value)


def _coherent(path: KeyPath, table: dict) -> None:
    if not table:
        raise Problem(path, f"profile {_dotted(path)} is empty: describe at least the board's 'prompt' or "
                            "'screen_text' (docs/lab-file.md)")
    given = [k for k in SETUP_KEYS if k in table]
    if given and len(given) != len(SETUP_KEYS):
        missing = [k for k in SETUP_KEYS if k not in table]
        raise Problem(path + (given[0],), f"profile {_dotted(path)} has {', '.join(given)} but not "
                                          f"{', '.join(missing)}: a setup menu needs its key, the console cue "
                                          "while the key is taken, and the text its screen shows")


PROFILE = TableSpec(
    {
        "prompt": Field(_regex),
        "screen_text": Field(_regex),
        "setup_key": Field(_keys),
        "setup_cue": Field(_regex),
        "setup_text": Field(_regex),
    },
    "profile",
    extra=_coherent,
)

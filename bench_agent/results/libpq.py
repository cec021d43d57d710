"""A PostgreSQL read through libpq itself (ctypes): for a new process that only reads a few rows.

psycopg is libpq plus adaptation, pools, async and type machinery; importing it costs a new process about
0.1 s of CPU, more than `panio job status` has in all (docs/scale.md). This calls the same C library for
one thing: a statement with text parameters whose rows come back as text, converted for the few column
types the job history has. The connection string is libpq's own (the results URL as given, with
``PGPASSWORD``, ``~/.pgpass``, TLS and the rest as psycopg would have them). Anything else (no libpq to
load, a server before 12, a type not listed) is not this module's: ``connect`` gives None, ``rows`` raises
``Unconvertible``, and the caller goes the usual way.

Owned, not borrowed (issue 41 item 4, docs/architecture.md), because of what it buys, measured with
``benchmarks/results_writes.py`` (a new process reading a finished job and its steps, psycopg and this
alternating, 18 pairs, load 3.7, 2 cores): CPU 129 -> 24 ms (x0.19), wall 188 -> 46 ms. Its whole surface is
``LibpqConnection.connect / rows / close`` behind ``results.read.Reader``; writes and every long-lived process go
through psycopg and SQLAlchemy's bounded pool (``results.db.engine_for``). Tested against the real server:
tests/test_light_reads.py (the same rows as the store's), tests/test_results_pool.py (its connection's name).
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys

_OK, _TUPLES_OK, _SQLSTATE = 0, 2, ord("C")  # CONNECTION_OK, PGRES_TUPLES_OK, PG_DIAG_SQLSTATE
_TEXT, _INT, _FLOAT = str, int, float
_TYPES = {16: lambda v: v == "t", 20: _INT, 21: _INT, 23: _INT, 26: _INT, 700: _FLOAT, 701: _FLOAT,
          25: _TEXT, 1043: _TEXT, 1042: _TEXT, 19: _TEXT}  # oid -> from text: bool, ints, floats, texts


class Unconvertible(Exception):
    """The statement failed (``sqlstate``), or returned a type this module does not convert."""

    def __init__(self, message: str, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def _candidates():
    """The system's libpq, then the one a psycopg-binary wheel ships beside itself."""
    yield "libpq.5.dylib" if sys.platform == "darwin" else "libpq.so.5"
    for entry in sys.path:
        yield from sorted(glob.glob(os.path.join(entry, "psycopg_binary*.libs", "libpq*")))


def application_name(argv: list[str] | None = None) -> str:
    """The name a panio process's PostgreSQL connections show in ``pg_stat_activity.application_name``:
    ``panio-`` and its command's words (``panio-recorder``, ``panio-schedule-serve``, ``panio-dashboard``,
    ``panio-job-status``), so each process's connections can be counted apart. Passed as libpq's
    ``fallback_application_name`` (by this reader and by the results pool, ``results.db.engine_for``): an
    ``application_name`` in the URL or ``PGAPPNAME`` wins."""
    argv = sys.argv if argv is None else argv
    words = [os.path.basename(argv[0]) if argv else "python"]
    for arg in argv[1:3]:
        if arg.startswith("-") or not arg.replace("-", "").isalpha():
            break
        words.append(arg)
    name = "-".join(words)
    return (name if name.startswith("panio") else f"panio-{name}")[:63]


_LIB: list = []


def _lib():
    if not _LIB:
        lib = None
        for name in _candidates():
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        _LIB.append(lib and _declare(lib))
    return _LIB[0]


def _declare(lib):
    p, s, i, u = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint
    for name, restype, argtypes in (
            ("PQconnectdbParams", p, [ctypes.POINTER(s), ctypes.POINTER(s), i]), ("PQstatus", i, [p]),
            ("PQerrorMessage", s, [p]), ("PQserverVersion", i, [p]), ("PQfinish", None, [p]),
            ("PQexecParams", p, [p, s, i, p, ctypes.POINTER(s), p, p, i]), ("PQresultStatus", i, [p]),
            ("PQresultErrorField", s, [p, i]), ("PQresultErrorMessage", s, [p]), ("PQclear", None, [p]),
            ("PQntuples", i, [p]), ("PQnfields", i, [p]), ("PQfname", s, [p, i]), ("PQftype", u, [p, i]),
            ("PQgetvalue", s, [p, i, i]), ("PQgetisnull", i, [p, i, i])):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def _strings(values: list[bytes | None]):
    return (ctypes.c_char_p * len(values))(*values)


class LibpqConnection:
    """One connection; ``rows(sql, params)`` with ``$1``... parameters given as a list."""

    def __init__(self, lib, conn) -> None:
        self.lib, self.conn = lib, conn

    @classmethod
    def connect(cls, url: str) -> LibpqConnection | None:
        """None when libpq cannot be loaded, the connection fails (the caller's usual way says why) or the
        server predates 12 (its floats print rounded unless told otherwise)."""
        lib = _lib()
        if lib is None:
            return None
        keys = [b"dbname", b"client_encoding", b"fallback_application_name", None]
        values = [url.encode(), b"UTF8", application_name().encode(), None]
        conn = lib.PQconnectdbParams(_strings(keys), _strings(values), 1)
        if not conn:
            return None
        if lib.PQstatus(conn) != _OK or lib.PQserverVersion(conn) < 120000:
            lib.PQfinish(conn)
            return None
        return cls(lib, conn)

    def close(self) -> None:
        if self.conn:
            self.lib.PQfinish(self.conn)
            self.conn = None

    def rows(self, sql: str, params: list) -> list[dict]:
        lib = self.lib
        values = [None if v is None else str(v).encode() for v in params]
        res = lib.PQexecParams(self.conn, sql.encode(), len(values), None, _strings(values), None, None, 0)
        if not res:
            raise Unconvertible((lib.PQerrorMessage(self.conn) or b"").decode(errors="replace"))
        try:
            if lib.PQresultStatus(res) != _TUPLES_OK:
                code = lib.PQresultErrorField(res, _SQLSTATE)
                raise Unconvertible((lib.PQresultErrorMessage(res) or b"").decode(errors="replace"),
                                    code.decode() if code else None)
            width = lib.PQnfields(res)
            names = [lib.PQfname(res, c).decode() for c in range(width)]
            try:
                kinds = [_TYPES[lib.PQftype(res, c)] for c in range(width)]
            except KeyError as exc:
                raise Unconvertible(f"column type oid {exc.args[0]} not converted here") from None
            return [{name: None if lib.PQgetisnull(res, r, c) else kind(lib.PQgetvalue(res, r, c).decode())
                     for c, (name, kind) in enumerate(zip(names, kinds))} for r in range(lib.PQntuples(res))]
        finally:
            lib.PQclear(res)

"""A PostgreSQL database of its own for a test, which the test can make unreachable and bring back (issue 43).

``ALTER DATABASE ... ALLOW_CONNECTIONS false`` refuses every new connection to that one database (the server
and every other test's database stay up), and ``pg_terminate_backend`` closes the ones open: to its clients,
the results database is away, as a restarted or unreachable server would be.
"""

from __future__ import annotations

import uuid

import pytest

ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


class AwayDatabase:
    def __init__(self) -> None:
        import sqlalchemy as sa

        self.name = "panio_away_" + uuid.uuid4().hex[:10]
        self.admin = sa.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3})
        try:
            self._sql(f"CREATE DATABASE {self.name}")
        except sa.exc.OperationalError as exc:
            pytest.skip(f"PostgreSQL not available: {exc.orig}")
        self.url = f"postgresql://postgres@127.0.0.1:5432/{self.name}?connect_timeout=3"

    def _sql(self, statement: str) -> None:
        import sqlalchemy as sa

        with self.admin.connect() as c:
            c.execute(sa.text(statement))

    def away(self) -> None:
        """No new connection is allowed; every open one is closed."""
        self._sql(f"ALTER DATABASE {self.name} ALLOW_CONNECTIONS false")
        self._sql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{self.name}'")

    def back(self) -> None:
        self._sql(f"ALTER DATABASE {self.name} ALLOW_CONNECTIONS true")

    def drop(self) -> None:
        self.back()
        self._sql(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
        self.admin.dispose()

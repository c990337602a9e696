"""SQLite results store: runs, problems, candidates and their verdicts, in one file.

Why SQLite: one file that survives a killed batch (every write is committed before the call
returns), readable by a second process while a run is still writing (WAL mode), and queryable
with plain SQL for ad-hoc analysis. The full ``Verdict`` is kept as JSON in ``verdicts.verdict``;
the columns next to it (status, speedups, times, flags) are copies for querying, never the source
of truth when reading a verdict back.

Thread safety: one connection shared by all threads of a process, guarded by a lock. Several
processes may open the same file; SQLite's busy timeout serialises their writes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hercules.harness.records import Verdict, to_jsonable, verdict_from_json
from hercules.problems.model import Candidate, Problem

SCHEMA_VERSION = 1

# (problem name, level, candidate name, verdict): the row shape the report functions take.
VerdictRow = tuple[str, int | None, str, Verdict]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    device      TEXT NOT NULL,
    versions    TEXT NOT NULL DEFAULT '{}',
    args        TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS problems (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT NOT NULL,
    level        INTEGER,
    source       TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    code         TEXT NOT NULL,
    UNIQUE (content_hash, name)
);
CREATE TABLE IF NOT EXISTS candidates (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    problem_id   INTEGER NOT NULL REFERENCES problems(id),
    name         TEXT NOT NULL,
    source       TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    code         TEXT NOT NULL,
    language     TEXT NOT NULL,
    UNIQUE (problem_id, name, content_hash)
);
CREATE TABLE IF NOT EXISTS verdicts (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id        INTEGER NOT NULL REFERENCES runs(id),
    candidate_id  INTEGER NOT NULL REFERENCES candidates(id),
    status        TEXT NOT NULL,
    correct       INTEGER NOT NULL,
    speedup_eager REAL,
    speedup_best  REAL,
    sol_fraction  REAL,
    cand_ms       REAL,
    ref_ms        REAL,
    flags         TEXT NOT NULL DEFAULT '[]',
    verdict       TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    UNIQUE (run_id, candidate_id)
);
CREATE INDEX IF NOT EXISTS verdicts_by_run ON verdicts(run_id);
CREATE INDEX IF NOT EXISTS candidates_by_problem ON candidates(problem_id);
"""


@dataclass(frozen=True)
class RunRecord:
    id: int
    started_at: str
    finished_at: str | None
    device: str
    versions: dict[str, Any]
    args: dict[str, Any]
    n_verdicts: int = 0


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _dumps(value: Any) -> str:
    # default=str: a stray non-JSON value (a Path, a dtype) must not lose the whole record.
    return json.dumps(to_jsonable(value), sort_keys=True, default=str)


def _num(value: Any) -> float | None:
    """A float column value; NaN is stored as NULL (SQLite would store it as NULL anyway)."""
    if value is None:
        return None
    value = float(value)
    return None if value != value else value


class ResultStore:
    """A results database in one SQLite file (created with its parent folders if missing)."""

    def __init__(self, path: str | Path, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        # isolation_level=None: autocommit; multi-statement writes use explicit transactions.
        self._conn = sqlite3.connect(
            str(self.path), timeout=timeout, isolation_level=None, check_same_thread=False
        )
        self._conn.row_factory = sqlite3.Row
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            # FULL: a committed write survives a power loss too, not only a killed process.
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            with self._transaction():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._conn.execute(statement)
                version = self._conn.execute("PRAGMA user_version").fetchone()[0]
                if version == 0:
                    self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                elif version > SCHEMA_VERSION:
                    raise RuntimeError(
                        f"{self.path}: schema version {version} is newer than this hercules "
                        f"({SCHEMA_VERSION})"
                    )

    # -- plumbing -------------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT under the thread lock; rolled back on any exception."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs -----------------------------------------------------------------------------------

    def start_run(
        self, device: str, versions: dict[str, Any] | None = None, args: dict[str, Any] | None = None
    ) -> int:
        with self._transaction() as conn:
            cur = conn.execute(
                "INSERT INTO runs (started_at, device, versions, args) VALUES (?, ?, ?, ?)",
                (_now(), device, _dumps(versions or {}), _dumps(args or {})),
            )
            return int(cur.lastrowid)

    def finish_run(self, run_id: int) -> None:
        with self._transaction() as conn:
            cur = conn.execute("UPDATE runs SET finished_at = ? WHERE id = ?", (_now(), run_id))
            if cur.rowcount != 1:
                raise KeyError(f"no run {run_id}")

    def runs(self) -> list[RunRecord]:
        """All runs, oldest first, with the number of verdicts each holds."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT r.*, (SELECT COUNT(*) FROM verdicts v WHERE v.run_id = r.id) AS n "
                "FROM runs r ORDER BY r.id"
            ).fetchall()
        return [
            RunRecord(
                id=row["id"],
                started_at=row["started_at"],
                finished_at=row["finished_at"],
                device=row["device"],
                versions=json.loads(row["versions"]),
                args=json.loads(row["args"]),
                n_verdicts=row["n"],
            )
            for row in rows
        ]

    def latest_run_id(self) -> int | None:
        with self._lock:
            row = self._conn.execute("SELECT MAX(id) FROM runs").fetchone()
        return None if row[0] is None else int(row[0])

    # -- problems and candidates ---------------------------------------------------------------

    def upsert_problem(self, problem: Problem) -> int:
        """The id of the problem with this name and code; inserted if new, level/source refreshed."""
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO problems (name, level, source, content_hash, code) "
                "VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (content_hash, name) DO UPDATE SET "
                "level = COALESCE(excluded.level, problems.level), source = excluded.source",
                (problem.name, problem.level, problem.source, problem.content_hash, problem.code),
            )
            row = conn.execute(
                "SELECT id FROM problems WHERE content_hash = ? AND name = ?",
                (problem.content_hash, problem.name),
            ).fetchone()
            return int(row[0])

    def upsert_candidate(self, problem_id: int, candidate: Candidate, language: str) -> int:
        """The id of this candidate (same problem, name and code); inserted if new."""
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO candidates (problem_id, name, source, content_hash, code, language) "
                "VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (problem_id, name, content_hash) DO UPDATE SET "
                "source = excluded.source, language = excluded.language",
                (
                    problem_id,
                    candidate.name,
                    candidate.source,
                    candidate.content_hash,
                    candidate.code,
                    language,
                ),
            )
            row = conn.execute(
                "SELECT id FROM candidates WHERE problem_id = ? AND name = ? AND content_hash = ?",
                (problem_id, candidate.name, candidate.content_hash),
            ).fetchone()
            return int(row[0])

    # -- verdicts -------------------------------------------------------------------------------

    def record_verdict(self, run_id: int, candidate_id: int, verdict: Verdict) -> None:
        """Store (or replace) the verdict of one candidate in one run; committed on return."""
        speedup = verdict.speedup
        values = (
            run_id,
            candidate_id,
            verdict.status.value,
            int(bool(verdict.correct)),
            _num(speedup.ratio("eager")),
            _num(speedup.best),
            _num(verdict.sol_fraction),
            _num(verdict.cand_ms),
            _num(verdict.ref_ms),
            json.dumps(list(verdict.flags)),
            _dumps(verdict),
            _now(),
        )
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO verdicts (run_id, candidate_id, status, correct, speedup_eager, "
                "speedup_best, sol_fraction, cand_ms, ref_ms, flags, verdict, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id, candidate_id) DO UPDATE SET "
                "status = excluded.status, correct = excluded.correct, "
                "speedup_eager = excluded.speedup_eager, speedup_best = excluded.speedup_best, "
                "sol_fraction = excluded.sol_fraction, cand_ms = excluded.cand_ms, "
                "ref_ms = excluded.ref_ms, flags = excluded.flags, verdict = excluded.verdict, "
                "created_at = excluded.created_at",
                values,
            )

    def verdicts(self, run_id: int) -> list[VerdictRow]:
        """(problem name, level, candidate name, verdict) for one run, in the order recorded."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT p.name AS problem, p.level AS level, c.name AS candidate, v.verdict "
                "FROM verdicts v JOIN candidates c ON c.id = v.candidate_id "
                "JOIN problems p ON p.id = c.problem_id "
                "WHERE v.run_id = ? ORDER BY v.id",
                (run_id,),
            ).fetchall()
        return [
            (row["problem"], row["level"], row["candidate"], verdict_from_json(json.loads(row["verdict"])))
            for row in rows
        ]

    def has_verdict(self, run_id: int, candidate_id: int) -> bool:
        """Whether this run already holds a verdict for the candidate (to resume a run)."""
        with self._lock:
            row = self._conn.execute(
                "SELECT 1 FROM verdicts WHERE run_id = ? AND candidate_id = ?", (run_id, candidate_id)
            ).fetchone()
        return row is not None

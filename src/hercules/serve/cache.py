"""SQLite cache of verdicts, keyed by the content hash of one submission.

A submission is the problem's source, the candidate's source and the evaluation options that change
a verdict; identical submissions get the stored verdict back, across restarts. Names are left out of
the key (the same code under another name is the same submission). Verdicts lost to infrastructure
failures are never stored.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

from hercules.harness.evaluate import EvalOptions
from hercules.harness.records import Verdict, verdict_from_json
from hercules.problems.model import Problem

# Options that do not change what an evaluation measures (where files go) stay out of the key.
_UNKEYED_OPTIONS = {"cache_dir", "artifacts_dir"}
SCHEMA_VERSION = 1


def submission_key(problem: Problem, candidate_code: str, options: EvalOptions, scope: str = "") -> str:
    """``scope`` names where verdicts come from (devices, software): a cache file carried to other
    hardware then misses instead of answering with another machine's times."""
    keyed = {k: v for k, v in vars(options).items() if k not in _UNKEYED_OPTIONS}
    # Surrounding blank lines do not change a program; code extracted from a completion and the
    # same code sent as a candidate then share a key.
    payload = json.dumps({"v": SCHEMA_VERSION, "problem": problem.code, "candidate": candidate_code.strip(),
                          "options": keyed, "scope": scope}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


class VerdictCache:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # One connection shared by the service's threads; the lock serialises its use.
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, problem TEXT, "
                         "status TEXT, verdict TEXT NOT NULL, created REAL NOT NULL)")
        self._lock = threading.Lock()

    def get(self, key: str) -> Verdict | None:
        with self._lock:
            row = self._db.execute("SELECT verdict FROM verdicts WHERE key = ?", (key,)).fetchone()
        return verdict_from_json(json.loads(row[0])) if row else None

    def put(self, key: str, verdict: Verdict) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?)",
                             (key, verdict.problem, verdict.status.value, json.dumps(verdict.to_json()), time.time()))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

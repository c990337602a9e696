"""Everything a run produced, in ``RUN/optimize.sqlite`` and as plain files under ``RUN/problems/``.

SQLite holds the truth (every write committed before the call returns, WAL so a second process
can read a live run): the prompt and completion of every model call, every variant's code and
verdict, and one row per evaluation started (with the process id), so a resumed run can show
that it redid nothing. The files (``<problem>/<slot>/prompt.md``, ``completion.md``,
``candidate.py``, ``verdict.json``) are copies for reading and grepping.

Resume: a slot with a stored variant is done; a slot with a stored completion but no variant is
extracted and evaluated again without asking the model (the kill came during its evaluation).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hercules.fileio import write_text_atomic
from hercules.harness.batch import slug
from hercules.harness.records import verdict_from_json
from hercules.optimize.records import Completion, Prompt, Slot, Variant
from hercules.problems.model import Problem

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS problems (
    name TEXT PRIMARY KEY, source TEXT NOT NULL, content_hash TEXT NOT NULL, code TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS calls (
    problem TEXT NOT NULL, round INTEGER NOT NULL, sample INTEGER NOT NULL,
    system TEXT NOT NULL, user TEXT NOT NULL, exemplars TEXT NOT NULL,
    completion TEXT NOT NULL, model TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL, tokens_estimated INTEGER NOT NULL, latency_s REAL NOT NULL,
    attempts INTEGER NOT NULL, error TEXT, created_at TEXT NOT NULL,
    PRIMARY KEY (problem, round, sample));
CREATE TABLE IF NOT EXISTS variants (
    problem TEXT NOT NULL, round INTEGER NOT NULL, sample INTEGER NOT NULL,
    origin TEXT NOT NULL, code TEXT NOT NULL, code_hash TEXT NOT NULL, status TEXT NOT NULL,
    reason TEXT, tags TEXT NOT NULL, reused INTEGER NOT NULL, speedup_eager REAL, speedup_best REAL,
    flags TEXT NOT NULL, verdict TEXT, created_at TEXT NOT NULL,
    PRIMARY KEY (problem, round, sample));
CREATE TABLE IF NOT EXISTS evaluations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, problem TEXT NOT NULL, round INTEGER NOT NULL,
    sample INTEGER NOT NULL, code_hash TEXT NOT NULL, pid INTEGER NOT NULL,
    started_at TEXT NOT NULL, finished_at TEXT);
"""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _write(path: Path, text: str) -> None:
    write_text_atomic(path, text)


class RunStore:
    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / "optimize.sqlite"
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")  # a committed row survives a kill or power loss
        self._conn.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _exec(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._conn.execute(sql, args)

    def slot_dir(self, slot: Slot) -> Path:
        return self.run_dir / "problems" / slug(slot.problem) / slot.name

    # -- run settings ---------------------------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        row = self._exec("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def set_meta(self, key: str, value: Any) -> None:
        self._exec("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, json.dumps(value, default=str)))

    def add_problem(self, problem: Problem) -> None:
        self._exec("INSERT OR IGNORE INTO problems (name, source, content_hash, code) VALUES (?, ?, ?, ?)",
                   (problem.name, problem.source, problem.content_hash, problem.code))

    def problem_hashes(self) -> dict[str, str]:
        return {r["name"]: r["content_hash"] for r in self._exec("SELECT name, content_hash FROM problems")}

    def problem_codes(self) -> dict[str, str]:
        return {r["name"]: r["code"] for r in self._exec("SELECT name, code FROM problems")}

    # -- model calls ----------------------------------------------------------------------------
    def record_call(self, slot: Slot, prompt: Prompt, completion: Completion) -> None:
        self._exec(
            "INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (slot.problem, slot.round, slot.sample, prompt.system, prompt.user, json.dumps(prompt.exemplars),
             completion.text, completion.model, completion.prompt_tokens, completion.completion_tokens,
             int(completion.tokens_estimated), completion.latency_s, completion.attempts, completion.error, _now()))
        folder = self.slot_dir(slot)
        _write(folder / "prompt.md", f"<!-- system -->\n{prompt.system}\n\n<!-- user -->\n{prompt.user}\n")
        _write(folder / "completion.md", completion.text if not completion.error else f"<!-- error: {completion.error} -->\n")

    def call(self, slot: Slot) -> tuple[Prompt, Completion] | None:
        r = self._exec("SELECT * FROM calls WHERE problem = ? AND round = ? AND sample = ?",
                       (slot.problem, slot.round, slot.sample)).fetchone()
        if r is None:
            return None
        prompt = Prompt(system=r["system"], user=r["user"], exemplars=tuple(json.loads(r["exemplars"])))
        completion = Completion(text=r["completion"], model=r["model"], prompt_tokens=r["prompt_tokens"],
                                completion_tokens=r["completion_tokens"], latency_s=r["latency_s"],
                                attempts=r["attempts"], tokens_estimated=bool(r["tokens_estimated"]), error=r["error"])
        return prompt, completion

    def tokens_spent(self) -> int:
        return int(self._exec("SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) FROM calls").fetchone()[0])

    # -- evaluations and variants ---------------------------------------------------------------
    def evaluation_started(self, slot: Slot, code_hash: str) -> int:
        cur = self._exec("INSERT INTO evaluations (problem, round, sample, code_hash, pid, started_at) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (slot.problem, slot.round, slot.sample, code_hash, os.getpid(), _now()))
        return int(cur.lastrowid)

    def evaluation_finished(self, row_id: int) -> None:
        self._exec("UPDATE evaluations SET finished_at = ? WHERE id = ?", (_now(), row_id))

    def evaluations(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._exec("SELECT * FROM evaluations ORDER BY id")]

    def record_variant(self, variant: Variant) -> None:
        v, s = variant.verdict, variant.slot
        verdict = v.to_json() if v is not None else None
        folder = self.slot_dir(s)
        _write(folder / "candidate.py", variant.code)
        if verdict is not None:
            _write(folder / "verdict.json", json.dumps(verdict, indent=1))
        self._exec(
            "INSERT OR REPLACE INTO variants VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (s.problem, s.round, s.sample, variant.origin, variant.code, variant.code_hash, variant.status,
             variant.reason, json.dumps(list(variant.tags)), int(variant.reused),
             v.speedup.ratio("eager") if v else None, v.speedup.best if v else None, json.dumps(list(variant.flags)),
             json.dumps(verdict) if verdict is not None else None, _now()))

    def variants(self, problem: str | None = None) -> list[Variant]:
        sql = "SELECT * FROM variants" + (" WHERE problem = ?" if problem else "") + " ORDER BY round, sample"
        rows = self._exec(sql, (problem,) if problem else ()).fetchall()
        return [Variant(slot=Slot(r["problem"], r["round"], r["sample"]), origin=r["origin"], code=r["code"],
                        status=r["status"], reason=r["reason"],
                        verdict=verdict_from_json(json.loads(r["verdict"])) if r["verdict"] else None,
                        tags=tuple(json.loads(r["tags"])), reused=bool(r["reused"])) for r in rows]

    def eval_seconds(self) -> float:
        """Evaluation seconds spent so far (reused verdicts cost nothing), summed inside SQLite."""
        row = self._exec("SELECT TOTAL(json_extract(verdict, '$.seconds')) FROM variants "
                         "WHERE verdict IS NOT NULL AND reused = 0").fetchone()
        return float(row[0])

"""Run directory and SQLite index of a debug run; every attempt kept, runs resumable.

    RUN/run.json                  what was asked (corpus, fixers, protocols, device)
    RUN/results.sqlite            one row per attempt round (the index; result.json files are the truth)
    RUN/attempts/<fixer>/<protocol>/<task>/s<sample>/i<round>/
        solution file, workspace/, build|test.stdout|stderr, eval/, answer.txt, result.json
    RUN/references/<task>/        the reference timed the same way (GPU runs of native tasks)

A round whose ``result.json`` exists is read back instead of run again (written last, atomically),
so a crash loses at most the rounds in flight.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

from hercules.fileio import write_text_atomic

SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    key TEXT PRIMARY KEY, fixer TEXT, protocol TEXT, task_id TEXT, family TEXT, labelled TEXT,
    sample INTEGER, round INTEGER, category TEXT, subtype TEXT, correct INTEGER, speedup REAL,
    code_hash TEXT, seconds REAL, record TEXT
);
"""


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)[:120]


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=1, default=str) + "\n")


class DebugStore:
    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.run_dir / "results.sqlite", check_same_thread=False)
        self._db.executescript(SCHEMA)

    def round_dir(self, fixer: str, protocol: str, task_id: str, sample: int, round_: int) -> Path:
        return self.run_dir / "attempts" / slug(fixer) / slug(protocol) / task_id / f"s{sample}" / f"i{round_}"

    def reference_dir(self, task_id: str) -> Path:
        return self.run_dir / "references" / task_id

    @staticmethod
    def load(where: Path) -> dict[str, Any] | None:
        path = where / "result.json"
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:  # a torn write from a crash: run the round again
            return None

    def save(self, where: Path, record: dict[str, Any]) -> None:
        write_json_atomic(where / "result.json", record)
        key = "/".join(str(record[k]) for k in ("fixer", "protocol", "task_id", "sample", "round"))
        row = (key, record["fixer"], record["protocol"], record["task_id"], record["family"], record["labelled"],
               record["sample"], record["round"], record["category"], record["subtype"], int(record["correct"]),
               record["gate"]["speedup"], record["code_hash"], record["seconds"], json.dumps(record, default=str))
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO attempts VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", row)
            self._db.commit()

    def rows(self) -> list[dict[str, Any]]:
        with self._lock:
            cur = self._db.execute("SELECT record FROM attempts ORDER BY fixer, protocol, task_id, sample, round")
            return [json.loads(r[0]) for r in cur.fetchall()]

    def close(self) -> None:
        with self._lock:
            self._db.close()

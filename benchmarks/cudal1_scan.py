"""The static scan over CUDA-L1's released kernels: how often each rule fires, and what it becomes.

    .venv/bin/python benchmarks/cudal1_scan.py [--corpus ../shared/corpora/cudal1] [--out FILE] [--lines]

Every record of ``a100.json`` and ``l40.json`` that has a kernel is scanned with its problem's
dtype. A finding is outright, conditional (a fallback: a flag only if its lines run) or a note; an
outright finding is a hint (a note in the verdict) where a dynamic check judges its threat on the
device, and a static-only flag elsewhere. The table counts findings and records per rule; with
``--lines`` every static-only flag is listed with the line it points at, for reading.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hercules.harness.scan import Finding, dynamic_check_for, scan_candidate
from hercules.problems.loaders import load_source

ROOT = Path(__file__).resolve().parents[1]
RELEASES = ("a100.json", "l40.json")
DEVICES = ("cuda", "cpu")


@dataclass(frozen=True)
class ScannedRecord:
    release: str
    name: str
    code: str
    findings: tuple[Finding, ...]


def default_corpus() -> Path:
    for path in (ROOT / "corpora" / "cudal1", ROOT.parent / "shared" / "corpora" / "cudal1"):
        if path.is_dir():
            return path
    return ROOT.parent / "shared" / "corpora" / "cudal1"


def scan_release(path: Path) -> list[ScannedRecord]:
    loaded = load_source(path)
    dtypes = {p.name: p.dtype_name for p in loaded.problems}
    return [ScannedRecord(path.name, c.problem, c.code, tuple(scan_candidate(c.code, dtypes[c.problem])))
            for c in loaded.candidates]


def static_only(finding: Finding, device: str) -> bool:
    """An outright finding that stays a flag on ``device`` (no dynamic check judges its threat there)."""
    return finding.decisive and dynamic_check_for(finding.flag, device) is None


def table(records: list[ScannedRecord]) -> str:
    kinds: dict[str, Counter] = {}
    with_flag: dict[str, set[tuple[str, str]]] = {}
    for record in records:
        for f in record.findings:
            counts = kinds.setdefault(f.flag, Counter())
            counts["findings"] += 1
            counts["outright" if f.decisive else "conditional" if f.conditional else "note"] += 1
            for device in DEVICES:
                if static_only(f, device):
                    counts[f"flag_{device}"] += 1
                    with_flag.setdefault(f"{f.flag}/{device}", set()).add((record.release, record.name))
            with_flag.setdefault(f.flag, set()).add((record.release, record.name))
    rows = ["| rule | records | findings | outright | conditional | notes | static-only flags on a GPU (records) "
            "| static-only flags on a CPU (records) |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for flag in sorted(kinds):
        c = kinds[flag]
        gpu = f"{c['flag_cuda']} ({len(with_flag.get(flag + '/cuda', ()))})"
        cpu = f"{c['flag_cpu']} ({len(with_flag.get(flag + '/cpu', ()))})"
        rows.append(f"| {flag} | {len(with_flag[flag])} | {c['findings']} | {c['outright']} | {c['conditional']} "
                    f"| {c['note']} | {gpu} | {cpu} |")
    return "\n".join(rows)


def flagged_records(records: list[ScannedRecord], device: str) -> int:
    return sum(any(static_only(f, device) for f in r.findings) for r in records)


def static_only_lines(records: list[ScannedRecord], device: str) -> list[str]:
    out = []
    for r in records:
        lines = r.code.splitlines()
        for f in r.findings:
            if static_only(f, device):
                text = lines[f.line - 1].strip() if 0 < f.line <= len(lines) else ""
                out.append(f"- {r.release} {r.name} line {f.line}: `{f.flag}` {f.reason} | `{text[:100]}`")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=default_corpus())
    parser.add_argument("--out", type=Path, help="write the markdown here as well as to stdout")
    parser.add_argument("--lines", action="store_true", help="list every static-only flag on a GPU with its line")
    args = parser.parse_args(argv)
    records = [r for name in RELEASES for r in scan_release(args.corpus / name)]
    parts = [f"{len(records)} records with a kernel ({', '.join(RELEASES)} in {args.corpus}).", "", table(records), "",
             f"Records with a static-only flag: {flagged_records(records, 'cuda')} on a GPU, "
             f"{flagged_records(records, 'cpu')} on a CPU."]
    if args.lines:
        parts += ["", "Static-only flags on a GPU, with the line each points at:", "",
                  *static_only_lines(records, "cuda")]
    text = "\n".join(parts) + "\n"
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Load test of ``hercules serve`` on loopback: concurrent clients, no lost or duplicated results,
p50/p99 latency, and an evaluation worker killed mid-request that must be retried.

    python benchmarks/serve_load.py --device cpu                       # this machine (about 1-2 minutes)
    PYTHONPATH=src python3 benchmarks/serve_load.py --device cuda      # GPU machine (under 5 minutes)

The service starts as a child process with an empty cache. Each of ``--clients`` threads sends
``--requests`` submissions drawn from a fixed workload in which every distinct submission is sent
by several clients (so in-flight de-duplication and the cache are exercised), and stops early at
``--max-seconds``. Meanwhile one candidate worker process of the service is killed with SIGKILL.

Checks (each PASS/FAIL in the table; the exit status is 1 if any fails):
  answered     every request got exactly one answer, none with status "error" (lost)
  evaluated    the service evaluated each distinct submission once (evaluations == distinct keys)
  consistent   all answers for one submission carry the same verdict (status and measured time)
  expected     statuses are what the workload says (honest: ok, precision loss: suspicious, wrong:
               incorrect, no code: no_code)
  retried      the killed worker's evaluation was retried (attempts 2) and answered with its real status

Results: ``benchmarks/results/serve_load_<device>.json`` and ``.md`` (also under $OUT when set).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from hercules.executor import evaluation_worker_pids
from hercules.serve.client import LaunchedServer, ServeClient, ServeError
from hercules.serve.examples import VARIANTS, example_candidate, example_problem
from hercules.serve.metrics import percentile


@dataclass(frozen=True)
class Item:
    label: str
    payload: dict
    expected: str | None  # None: not asserted (built-in suite candidates on the GPU)


def workload(sizes: list[int], suite: bool) -> list[Item]:
    items = []
    for n in sizes:
        problem = example_problem(n)
        for name, expression, expected in VARIANTS:
            items.append(Item(f"{name}@{n}", {"problem": problem, "candidate": example_candidate(expression)},
                              expected))
        honest = example_candidate(VARIANTS[0][1])
        items.append(Item(f"completion@{n}", {"problem": problem, "completion": f"Fused.\n```python\n{honest}```"},
                          "ok"))
        items.append(Item(f"no_code@{n}", {"problem": problem, "completion": "I cannot improve this."}, "no_code"))
    if suite:
        from hercules.suite.catalog import suite_candidate_paths, suite_problem_names

        for name in suite_problem_names():
            for path in suite_candidate_paths(name):
                if not path.stem.startswith("cuda_"):  # nvcc builds would dominate a 5-minute budget
                    items.append(Item(f"{name}/{path.stem}", {"problem": name, "candidate": path.read_text()}, None))
    return items


def slow_item(n: int) -> Item:
    """Held in its worker for 2 s while building: the one whose worker gets killed."""
    code = example_candidate(VARIANTS[0][1], init="time.sleep(2.0)")
    return Item(f"slow@{n}", {"problem": example_problem(n), "candidate": code}, "ok")


@dataclass
class Record:
    client: int
    label: str
    expected: str | None
    latency_s: float
    answer: dict | None
    error: str | None = None


def run_clients(url: str, items: list[Item], clients: int, requests: int, deadline: float,
                seed: int) -> list[Record]:
    """Each client sends ``requests`` submissions; every distinct one is sent by several clients."""
    records: list[Record] = []
    lock = threading.Lock()
    rng = random.Random(seed)
    plans = [[items[(c + k * clients) % len(items)] for k in range(requests)] for c in range(clients)]
    for plan in plans:
        rng.shuffle(plan)

    def client(index: int) -> None:
        api = ServeClient(url, timeout_s=600, retries=6, backoff_s=0.5)
        for item in plans[index]:
            if time.monotonic() > deadline:
                return
            started = time.perf_counter()
            try:
                answer, error = api._call("POST", "/v1/evaluate", item.payload, accept={503}), None
            except ServeError as exc:
                answer, error = None, str(exc)
            with lock:
                records.append(Record(index, item.label, item.expected, time.perf_counter() - started, answer, error))

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(1.0, deadline - time.monotonic() + 600))
    with lock:  # a client still waiting after the join limit has lost its answer: it counts as lost
        return records + [Record(c, "unanswered", None, 0.0, None, "no answer")
                          for c, thread in enumerate(threads) if thread.is_alive()]


def kill_one_candidate_worker(server_pid: int, stop: threading.Event, killed: list[int]) -> None:
    """SIGKILL the first candidate worker that has been running for half a second."""
    seen: dict[int, float] = {}
    while not stop.is_set():
        now = time.monotonic()
        for pid, role in evaluation_worker_pids(server_pid):
            if role != "candidate":
                continue
            if now - seen.setdefault(pid, now) >= 0.5:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
                killed.append(pid)
                return
        time.sleep(0.05)


def check(records: list[Record], metrics: dict, killed: list[int]) -> dict[str, tuple[bool, str]]:
    answered = [r for r in records if r.answer is not None]
    lost = [r for r in records if r.answer is None or r.answer.get("status") == "error"]
    by_key: dict[str, list[dict]] = {}
    for r in answered:
        by_key.setdefault(r.answer["key"], []).append(r.answer)
    evaluated_keys = {k for k, answers in by_key.items() if answers[0]["status"] != "no_code"}
    evaluations = metrics["counts"].get("evaluations", 0)
    inconsistent = [k for k, answers in by_key.items()
                    if len({(a["status"], (a.get("verdict") or {}).get("cand_ms")) for a in answers}) != 1]
    unexpected = [f"{r.label}: {r.answer['status']} (expected {r.expected})" for r in answered
                  if r.expected is not None and r.answer["status"] != r.expected]
    crashed = [r.label for r in answered if r.answer["status"] in ("crash", "error")]
    retried = [r for r in answered if r.answer.get("attempts", 0) >= 2]
    return {
        "answered": (bool(records) and not lost,
                     f"{len(answered)}/{len(records)} answered, {len(lost)} lost or errors"),
        "evaluated": (evaluations == len(evaluated_keys),
                      f"{evaluations} evaluations for {len(evaluated_keys)} distinct submissions"),
        "consistent": (not inconsistent, f"{len(by_key)} keys, {len(inconsistent)} with differing answers"),
        "expected": (not unexpected, "; ".join(unexpected[:3]) or "all statuses as expected"),
        "retried": (bool(killed) and bool(retried) and not crashed and metrics["counts"].get("retries", 0) >= 1,
                    (f"killed pid {killed or '-'}; {len(retried)} answer(s) after a retry "
                    f"({', '.join(r.label for r in retried[:3])}); crashes: {len(crashed)}")),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument("--clients", type=int, default=None, help="concurrent clients (CPU 8, GPU 16)")
    parser.add_argument("--requests", type=int, default=6, help="submissions per client")
    parser.add_argument("--max-seconds", type=float, default=240.0, help="no new requests after this")
    parser.add_argument("--workers", type=int, default=None, help="evaluations at once (server default)")
    parser.add_argument("--budget", type=float, default=None, help="timing budget (CPU 0.05 s, GPU 0.1 s)")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--baselines", default="eager", help="baselines timed beside each submission")
    parser.add_argument("--suite", action=argparse.BooleanOptionalAction, default=None,
                        help="add the built-in suite's PyTorch/Triton candidates (default: on a GPU)")
    parser.add_argument("--ray-address", default=None)
    parser.add_argument("--results", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args()
    if (args.clients is not None and args.clients < 1) or args.requests < 1 or args.max_seconds <= 0:
        parser.error("--clients and --requests must be at least 1, --max-seconds positive")

    import torch

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    gpu = device.startswith("cuda")
    suite = gpu if args.suite is None else args.suite
    args.clients = args.clients or (16 if gpu else 8)
    budget = args.budget or (0.1 if gpu else 0.05)
    sizes = [128, 256, 512] if gpu else [64, 128]
    items = workload(sizes, suite)
    slow = slow_item(sizes[0])
    planned = args.clients * args.requests + 1

    work = Path(tempfile.mkdtemp(prefix="hercules-serve-load-"))
    server_args = ["--device", device, "--trials", str(args.trials), "--budget", str(budget),
                   "--baselines", args.baselines, "--cache", str(work / "cache.sqlite")]
    if args.workers:
        server_args += ["--workers", str(args.workers)]
    if args.ray_address:
        server_args += ["--ray-address", args.ray_address]
    print(f"serve_load: {device}, {args.clients} clients x {args.requests} requests over {len(items)} distinct "
          f"submissions (+1 slow one whose worker is killed); server log {work / 'serve.log'}", file=sys.stderr)
    started = time.perf_counter()
    with LaunchedServer(server_args, log_path=str(work / "serve.log"), timeout_s=120) as server:
        startup_s = time.perf_counter() - started
        deadline = time.monotonic() + args.max_seconds
        stop, killed = threading.Event(), []
        killer = threading.Thread(target=kill_one_candidate_worker, args=(server.pid, stop, killed), daemon=True)
        killer.start()
        began = time.perf_counter()
        slow_records: list[Record] = []
        slow_thread = threading.Thread(target=lambda: slow_records.extend(
            run_clients(server.url, [slow], 1, 1, deadline, 0)), daemon=True)
        slow_thread.start()
        time.sleep(0.2)  # the slow one first, so it is the worker most likely to be killed
        records = run_clients(server.url, items, args.clients, args.requests, deadline, 1)
        slow_thread.join(600)
        stop.set()
        wall_s = time.perf_counter() - began
        records += slow_records
        metrics, health = server.client.metrics(), server.client.health()
    checks = check(records, metrics, killed)
    latencies = [r.latency_s for r in records if r.answer is not None]
    evaluated = [r.latency_s for r in records if r.answer and not r.answer["cached"] and r.answer["attempts"]]
    summary = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": device, "gpu": torch.cuda.get_device_name() if gpu else None,
        "devices": health["devices"], "capacity": health["capacity"],
        "clients": args.clients, "requests_per_client": args.requests, "planned": planned, "sent": len(records),
        "answered": len(latencies), "distinct_payloads": len(items) + 1, "stopped_by_time_limit": len(records) < planned,
        "startup_s": round(startup_s, 2), "wall_s": round(wall_s, 2),
        "requests_per_s": round(len(latencies) / wall_s, 2),
        "client_latency_ms": {"p50": _ms(percentile(latencies, 50)), "p99": _ms(percentile(latencies, 99)),
                              "mean": _ms(statistics.fmean(latencies)) if latencies else None},
        "evaluated_latency_ms": {"p50": _ms(percentile(evaluated, 50)), "p99": _ms(percentile(evaluated, 99))},
        "server_metrics": metrics,
        "checks": {name: {"pass": ok, "detail": detail} for name, (ok, detail) in checks.items()},
        "options": {"budget_s": budget, "trials": args.trials, "baselines": args.baselines, "suite": suite,
                    "ray_address": args.ray_address},
        "statuses": _count(r.answer["status"] for r in records if r.answer),
    }
    write_results(summary, args.results, device)
    print_table(summary)
    return 0 if all(ok for ok, _ in checks.values()) else 1


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1e3, 1)


def _count(values) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return counts


def write_results(summary: dict, folder: Path, device: str) -> None:
    targets = [folder] + ([Path(os.environ["OUT"])] if os.environ.get("OUT") else [])
    name = f"serve_load_{device.split(':')[0]}"
    for target in targets:
        target.mkdir(parents=True, exist_ok=True)
        (target / f"{name}.json").write_text(json.dumps(summary, indent=1))
        (target / f"{name}.md").write_text(markdown(summary))


def rows(summary: dict) -> list[tuple[str, str]]:
    m = summary["server_metrics"]
    counts = m["counts"]
    out = [
        ("device", f"{summary['device']} {summary['gpu'] or ''} ({summary['capacity']} evaluations at once)"),
        ("requests", (f"{summary['answered']}/{summary['sent']} answered in {summary['wall_s']} s "
                     f"({summary['requests_per_s']}/s), {summary['distinct_payloads']} distinct payloads"
                      + (", stopped by the time limit" if summary["stopped_by_time_limit"] else ""))),
        ("client latency p50 / p99", f"{summary['client_latency_ms']['p50']} / {summary['client_latency_ms']['p99']} ms"),
        ("evaluated (not cached) p50 / p99",
         f"{summary['evaluated_latency_ms']['p50']} / {summary['evaluated_latency_ms']['p99']} ms"),
        ("server latency p50 / p99", f"{m['latency_ms']['p50']} / {m['latency_ms']['p99']} ms"),
        ("evaluations / cache hits / deduplicated / retries",
         (f"{counts.get('evaluations', 0)} / {counts.get('cache_hits', 0)} / {counts.get('deduplicated', 0)} / "
         f"{counts.get('retries', 0)}")),
        ("statuses", ", ".join(f"{k} {v}" for k, v in sorted(summary["statuses"].items()))),
    ]
    for name, check in summary["checks"].items():
        out.append((f"check: {name}", ("PASS " if check["pass"] else "FAIL ") + check["detail"]))
    return out


def markdown(summary: dict) -> str:
    lines = [f"# hercules serve load test ({summary['when']})", "", "| measure | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows(summary)]
    return "\n".join(lines) + "\n"


def print_table(summary: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="hercules serve load test")
    table.add_column("measure")
    table.add_column("value")
    for key, value in rows(summary):
        table.add_row(key, value)
    Console(width=160).print(table)


if __name__ == "__main__":
    sys.exit(main())

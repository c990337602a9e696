"""Hand-over cost between two worker processes: sealed host memory files against device packs.

    python benchmarks/datapath.py [--sizes-mb 1,16,256,1024,3200] [--reps 5] [--out FILE]

One process writes a pack of a device tensor of each size and hands the descriptor to another
process over a Unix socket; that process reads the pack into its own device memory and answers.
The figure is the wall time of the whole hand-over (write, descriptor, read, answer), median of
``--reps``, both media side by side per size. Needs a CUDA device; prints each row as it is
measured and writes all rows as JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from multiprocessing import Pipe
from pathlib import Path

import torch

from hercules.harness.datapath import PackLayout, read_pack, receive_fds, send_fds, write_pack


def _receiver(conn, device: str) -> None:
    torch.cuda.init()
    torch.zeros(1, device=device)
    conn.send("ready")
    while True:
        message = conn.recv()
        if message is None:
            return
        [fd] = receive_fds(conn.fileno(), 1, timeout=600)
        values = read_pack(fd, PackLayout.from_message(message), device)
        os.close(fd)
        torch.cuda.synchronize()
        conn.send(int(values[0].numel()))
        del values


def _hand_over(conn, tensor: torch.Tensor, medium: str) -> float:
    started = time.perf_counter()
    fd, layout = write_pack([tensor], "bench", medium, tensor.device)
    conn.send(layout.to_message())
    send_fds(conn.fileno(), [fd])
    os.close(fd)
    assert conn.recv() == tensor.numel()
    if medium == "cuda" and layout.medium != "cuda":
        raise RuntimeError("the driver refused a device pack (the host path was taken)")
    return (time.perf_counter() - started) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes-mb", default="1,16,256,1024,3200")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", default="datapath_results.json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/datapath.py compares device hand-overs; no CUDA device is present")
    device = "cuda"
    ours, theirs = Pipe(duplex=True)
    child = multiprocessing.get_context("spawn").Process(target=_receiver, args=(theirs, device), daemon=True)
    child.start()
    assert ours.recv() == "ready"
    rows = []
    print(f"{'MB':>8} {'memfd ms':>10} {'device ms':>10} {'ratio':>7}", flush=True)
    for mb in (float(x) for x in args.sizes_mb.split(",") if x):
        tensor = torch.randn(int(mb * (1 << 20)) // 4, device=device)
        row = {"mb": mb}
        for medium in ("memfd", "cuda"):
            try:
                _hand_over(ours, tensor, medium)  # first touch of the path at this size
                row[medium] = statistics.median(_hand_over(ours, tensor, medium) for _ in range(args.reps))
            except Exception as exc:  # noqa: BLE001 - the table says which medium failed and why
                row[medium] = None
                row[f"{medium}_error"] = f"{type(exc).__name__}: {exc}"[:300]
        ratio = row["memfd"] / row["cuda"] if row.get("memfd") and row.get("cuda") else None
        row["ratio"] = ratio
        rows.append(row)
        fmt = lambda v: f"{v:10.2f}" if v is not None else f"{'failed':>10}"  # noqa: E731
        print(f"{mb:8.0f} {fmt(row['memfd'])} {fmt(row['cuda'])} {ratio if ratio is None else round(ratio, 1)!s:>7}"
              + (f"  {row.get('cuda_error', '')}" if row.get("cuda") is None else ""), flush=True)
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
        del tensor
        torch.cuda.empty_cache()
    ours.send(None)
    child.join(30)


if __name__ == "__main__":
    main()

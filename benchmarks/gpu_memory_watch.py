"""Run a command and print, every few seconds, who holds the GPU and how much memory is in use.

    python benchmarks/gpu_memory_watch.py --every 10 --after 30 -- python benchmarks/kernelbench.py ...

Each sample prints the device's used memory and how much of it NVML attributes to no visible
process (``hercules.harness.device_memory``), then every process with a /dev/nvidia* file open
(found through /proc, so a process NVML does not attribute is still listed) with its parent, age,
resident memory, NVML's figure for it where NVML has one, and its command line. After the command
ends, sampling goes on for ``--after`` seconds: device memory still in use then, and the processes
holding it, are what outlived the command.
The command's own output passes through unchanged; watch lines start with ``watch``.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from hercules.harness import device_memory
from hercules.harness.sandbox import _read_stat


def _describe(pid: int, cmd: str) -> str:
    stat = _read_stat(pid)
    if stat is None:
        return f"pid {pid}: gone"
    age = float(Path("/proc/uptime").read_text().split()[0]) - stat.start / os.sysconf("SC_CLK_TCK")
    rss_mb = stat.rss_pages * os.sysconf("SC_PAGE_SIZE") / 1e6
    return f"pid {pid} ppid {stat.ppid} age {age:.0f}s rss {rss_mb:.0f}MB {cmd[:140]}"


def sample(label: str, index: int) -> None:
    memory = device_memory.read(index)
    if memory is None:
        print(f"watch {time.strftime('%T')} {label}: no nvidia-smi, or it cannot say", flush=True)
        return
    print(f"watch {time.strftime('%T')} {label}: {memory.used_mib} of {memory.total_mib} MiB in use, "
          f"{memory.unattributed_mib} MiB attributed to no visible process", flush=True)
    nvml = dict(memory.attributed)
    for pid, cmd in memory.holders:
        print(f"watch   {_describe(pid, cmd)} nvml={nvml.get(pid, '-')}", flush=True)
    for pid in sorted(set(nvml) - {pid for pid, _ in memory.holders}):
        print(f"watch   NVML only: pid {pid} {nvml[pid]} MiB", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--after", type=float, default=30.0, help="seconds to go on sampling after the command")
    parser.add_argument("--device", type=int, default=0, help="torch's CUDA device index")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    sample("before", args.device)
    child = subprocess.Popen(command)
    try:
        while child.poll() is None:
            time.sleep(args.every)
            sample("during", args.device)
    except KeyboardInterrupt:
        child.send_signal(2)
        child.wait()
    print(f"watch command ended: exit status {child.returncode}", flush=True)
    deadline = time.monotonic() + args.after
    while time.monotonic() < deadline:
        sample("after", args.device)
        time.sleep(min(args.every, max(0.0, deadline - time.monotonic())))
    sample("end", args.device)
    return child.returncode or 0


if __name__ == "__main__":
    sys.exit(main())

"""Who holds a GPU's memory, asked from outside any CUDA context: ``nvidia-smi`` for the device's
figures and NVML's per-process attribution, ``/proc`` for every process with a ``/dev/nvidia*``
file open.

Why: on the H100 16 KernelBench references ran out of device memory when judged again alone with
77.5 of 79.2 GiB in use, of which NVML attributed about 13 GiB to visible processes. A verdict that
says only "out of memory" blames the problem for the machine's state; this says what held the
device. Nothing here initialises CUDA (the evaluating process must not hold a context of its own).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DeviceMemory:
    used_mib: int
    total_mib: int
    attributed: tuple[tuple[int, int], ...]  # (pid, MiB) as NVML attributes them, this device only
    holders: tuple[tuple[int, str], ...]  # (pid, command line) of processes with /dev/nvidia* open

    @property
    def attributed_mib(self) -> int:
        return sum(mib for _pid, mib in self.attributed)

    @property
    def unattributed_mib(self) -> int:
        return max(0, self.used_mib - self.attributed_mib)

    @property
    def used_fraction(self) -> float:
        return self.used_mib / self.total_mib if self.total_mib > 0 else 0.0

    def describe(self) -> str:
        gib = lambda mib: f"{mib / 1024:.1f} GiB"  # noqa: E731
        apps = ", ".join(f"pid {pid} {gib(mib)}" for pid, mib in self.attributed) or "none"
        held = "; ".join(f"pid {pid} {cmd[:80]}" for pid, cmd in self.holders) or "none"
        return (f"{gib(self.used_mib)} of {gib(self.total_mib)} in use; NVML attributes {gib(self.attributed_mib)} "
                f"({apps}) and {gib(self.unattributed_mib)} to no visible process; processes with the GPU open: {held}")


def parse_gpu_line(text: str, index: int) -> tuple[int, int, str] | None:
    """(used MiB, total MiB, uuid) of GPU ``index`` from ``nvidia-smi --query-gpu=index,memory.used,
    memory.total,uuid --format=csv,noheader,nounits``; None when that GPU is not listed."""
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 4 and fields[0].isdigit() and int(fields[0]) == index:
            try:
                return int(fields[1]), int(fields[2]), fields[3]
            except ValueError:
                return None
    return None


def parse_apps(text: str, uuid: str) -> tuple[tuple[int, int], ...]:
    """(pid, MiB) on the GPU ``uuid`` from ``nvidia-smi --query-compute-apps=gpu_uuid,pid,
    used_memory --format=csv,noheader,nounits`` (a figure NVML cannot read is left out)."""
    found = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3 and fields[0] == uuid and fields[1].isdigit() and fields[2].isdigit():
            found.append((int(fields[1]), int(fields[2])))
    return tuple(found)


def holders(prefix: str = "/dev/nvidia", exclude: int | None = None) -> tuple[tuple[int, str], ...]:
    """(pid, command line) of every process with a file under ``prefix`` open (those this process
    may read: all of them as root), this one left out with ``exclude``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == exclude:
            continue
        try:
            if any(os.readlink(fd).startswith(prefix) for fd in (entry / "fd").iterdir()):
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                found.append((int(entry.name), cmd))
        except OSError:
            continue  # ended while looked at, or not ours to read
    return tuple(sorted(found))


def physical_index(device_index: int, visible: str | None = None) -> int | None:
    """NVML's index of the device torch calls ``cuda:device_index`` under CUDA_VISIBLE_DEVICES
    (``visible``; the environment's when None); None where the list names devices by UUID."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    if visible is None or visible.strip() == "":
        return device_index
    names = [v.strip() for v in visible.split(",")]
    if device_index >= len(names) or not names[device_index].isdigit():
        return None
    return int(names[device_index])


def read(device_index: int = 0, timeout_s: float = 20.0) -> DeviceMemory | None:
    """The device's memory and who holds it; None without ``nvidia-smi`` or where it cannot say."""
    smi = shutil.which("nvidia-smi")
    index = physical_index(device_index)
    if smi is None or index is None:
        return None
    try:
        gpus = subprocess.run([smi, "--query-gpu=index,memory.used,memory.total,uuid", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=timeout_s)
        apps = subprocess.run([smi, "--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    gpu = parse_gpu_line(gpus.stdout, index)
    if gpus.returncode != 0 or gpu is None:
        return None
    used, total, uuid = gpu
    return DeviceMemory(used_mib=used, total_mib=total, attributed=parse_apps(apps.stdout, uuid),
                        holders=holders(exclude=os.getpid()))

"""Worker processes: the environment they start with."""

import os
import subprocess
import sys
from pathlib import Path

from hercules.harness.ipc import HOST_ALLOCATOR_ENV, WORKER_OPENMP_ENV, Worker

# A burst that keeps every call's outputs, five times: 16 buffers of 2 MB allocated and written,
# then all freed. Prints the minor page faults that took.
_CHURN = """
import resource
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    kept = []
    for _ in range(16):
        block = bytearray(2 << 20)
        block[::4096] = b"\\x01" * len(block[::4096])
        kept.append(block)
    del kept, block
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
PAGES_PER_BURST = 16 * (2 << 20) // 4096


def _faults(extra_env: dict[str, str]) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.update(extra_env)
    done = subprocess.run([sys.executable, "-c", _CHURN], env=env, capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


def test_allocator_setting_reuses_freed_memory_instead_of_faulting_it_in_again() -> None:
    default = _faults({})
    kept = _faults(HOST_ALLOCATOR_ENV)
    # glibc's default hands the freed memory back: every burst faults its pages in again.
    assert default >= 4 * PAGES_PER_BURST, default
    # Kept: the first burst's pages fault in once, the other four reuse them.
    assert kept < 2 * PAGES_PER_BURST, (kept, default)


def test_every_worker_starts_with_the_allocator_and_openmp_settings(tmp_path: Path, monkeypatch) -> None:
    # One from the parent's environment must not reach a worker: the candidate's sandbox passes none.
    monkeypatch.setenv("GOMP_SPINCOUNT", "INFINITE")
    worker = Worker.start("reference", tmp_path / "worker.log")
    try:
        environ = Path(f"/proc/{worker.process.pid}/environ").read_bytes().split(b"\0")
        pairs = dict(item.decode().split("=", 1) for item in environ if b"=" in item)
        for key, value in {**HOST_ALLOCATOR_ENV, **WORKER_OPENMP_ENV}.items():
            assert pairs.get(key) == value
    finally:
        worker.close()

"""Background threads and processes: work that goes on outside the timed calls (and may finish the
result between them). The thread check after timing sees threads still alive in the candidate's
process, not a pool that went idle, a process it started and ended, or a thread started in C++
and joined: the source is the only evidence of those, so a finding is a flag."""

from __future__ import annotations

from hercules.harness.records import Flag
from hercules.harness.scan.events import EmbeddedSource, source_pattern
from hercules.harness.scan.rule import Rule

_THREAD_ROOTS = {"threading", "_thread", "concurrent", "multiprocessing", "asyncio"}
_THREAD_NAMES = {"os.fork", "os.forkpty", "torch.jit.fork", "torch.jit._fork", "torch._C._fork"}
_CPP_THREAD = source_pattern(r"\bstd::(?:thread|jthread|async)\b|\bpthread_create\b|\bboost::thread\b")


class BackgroundThread(Rule):
    flag = Flag.BACKGROUND_THREAD
    static_only_because = ("the thread check sees only threads still alive after timing; a pool gone idle, a "
                           "process already ended or a C++ thread joined in time leave nothing to see")

    def on_reference(self, node, qual: str) -> None:
        if qual.split(".")[0] in _THREAD_ROOTS or qual in _THREAD_NAMES or qual.startswith("torch.multiprocessing"):
            self.add(node, f"uses {qual} (threads or processes)")

    def on_source(self, source: EmbeddedSource) -> None:
        for match in _CPP_THREAD.finditer(source.text):
            self.add(source.line_at(match.start()), f"CUDA/C++ source starts a thread ({match.group(0).strip()[:60]})")

"""Snapshots of process state a candidate must leave alone, taken in the worker before the
candidate is imported and compared after it ran.

Three findings: replaced attributes of torch, timers, builtins and this harness (monkey-patching),
changed process-wide torch settings (backend flags, default dtype, matmul precision), and threads
that the candidate left running.
"""

from __future__ import annotations

import builtins
import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

# Objects whose attributes an honest candidate never replaces. Their contents are recorded by
# identity, so replacing a function with a wrapper shows up even when the wrapper behaves alike.
def _watched_namespaces() -> dict[str, Any]:
    import torch.testing

    watched: dict[str, Any] = {
        "torch": torch,
        "torch.Tensor": torch.Tensor,
        "torch.nn.functional": F,
        "torch.nn.Module": torch.nn.Module,
        "torch.testing": torch.testing,
        "torch.cuda": torch.cuda,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Stream": torch.cuda.Stream,
        "torch.linalg": torch.linalg,
        "time": time,
        "math": math,
        "builtins": builtins,
        "threading": threading,
    }
    for name in ("hercules.harness.timing", "hercules.harness.integrity", "hercules.harness.worker",
                 "hercules.harness.ipc", "numpy"):
        module = sys.modules.get(name)
        if module is not None:
            watched[name] = module
    return watched


def _is_watched(name: str, value: Any) -> bool:
    # Only callables: module-level flags and counters (e.g. torch.cuda._initialized) change
    # honestly during lazy initialisation, functions and classes do not.
    if not callable(value):
        return False
    if name.startswith("__") and name.endswith("__"):
        return True  # operator slots such as torch.Tensor.__eq__
    return not name.startswith("_")


def _identity_map(namespace: Any, private_too: bool = False) -> dict[str, int]:
    try:
        items = list(vars(namespace).items())
    except TypeError:
        return {}
    return {name: id(value) for name, value in items
            if _is_watched(name, value) or (private_too and callable(value))}


def _global_settings() -> dict[str, Any]:
    settings: dict[str, Any] = {
        "default_dtype": str(torch.get_default_dtype()),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "grad_enabled": torch.is_grad_enabled(),
        "num_threads": torch.get_num_threads(),
        "cudnn.enabled": torch.backends.cudnn.enabled,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cuda.matmul.allow_fp16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "cuda.matmul.allow_bf16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "autocast_cpu": torch.is_autocast_enabled("cpu"),
    }
    if torch.cuda.is_available():
        settings["autocast_cuda"] = torch.is_autocast_enabled("cuda")
    for backend in ("flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled"):
        getter: Callable[[], bool] | None = getattr(torch.backends.cuda, backend, None)
        if getter is not None:
            settings[f"cuda.{backend}"] = getter()
    return settings


_ORIGIN_ATTR = "_hercules_started_by"


def track_thread_origins(candidate_file: str) -> None:
    """Record, for every thread started from now on, whether the candidate's own code started it.

    torch.compile starts compile workers and tqdm a monitor thread on an honest candidate's behalf;
    such threads are started by library code, and only threads whose nearest starting frame outside
    the threading machinery lies in the candidate's file (or in code without a file) count.
    """
    original_start = threading.Thread.start
    machinery = (threading.__file__, concurrent_file())

    def start(self, *args, **kwargs):
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename in machinery:
            frame = frame.f_back
        filename = frame.f_code.co_filename if frame is not None else "<unknown>"
        candidate = filename == candidate_file or filename.startswith("<")
        setattr(self, _ORIGIN_ATTR, "candidate" if candidate else "library")
        return original_start(self, *args, **kwargs)

    threading.Thread.start = start


def concurrent_file() -> str:
    import concurrent.futures.thread as pool

    return pool.__file__


def _thread_ids() -> set[int]:
    # sys._current_frames sees every thread running Python code, including ones started with the
    # low-level _thread module, which threading.enumerate() does not list.
    ids = set(sys._current_frames())
    ids.update(t.ident for t in threading.enumerate() if t.ident is not None)
    return ids


@dataclass
class Snapshot:
    attributes: dict[str, dict[str, int]]
    settings: dict[str, Any]
    threads: set[int]

    @classmethod
    def take(cls) -> "Snapshot":
        namespaces = _watched_namespaces()
        return cls(
            attributes={name: _identity_map(ns, name.startswith("hercules.")) for name, ns in namespaces.items()},
            settings=_global_settings(),
            threads=_thread_ids(),
        )

    def changed_attributes(self) -> list[str]:
        changed = []
        namespaces = _watched_namespaces()
        for name, before in self.attributes.items():
            after = _identity_map(namespaces[name], name.startswith("hercules.")) if name in namespaces else {}
            for attr, ident in before.items():
                if attr in ("__dict__", "__weakref__") or attr.startswith("_ctypes"):
                    continue
                if after.get(attr) != ident:
                    changed.append(f"{name}.{attr}")
            # New public attributes on torch or the timers are also tampering.
            for attr in after.keys() - before.keys():
                if name in ("torch.Tensor", "torch.cuda.Event", "time", "builtins", "torch.testing"):
                    changed.append(f"{name}.{attr} (added)")
        return sorted(changed)

    def changed_settings(self) -> list[str]:
        now = _global_settings()
        return sorted(f"{k}: {self.settings.get(k)!r} -> {now.get(k)!r}"
                      for k in now if now.get(k) != self.settings.get(k))

    def new_threads(self) -> list[str]:
        """Threads alive now that were not before, less those that library code started."""
        alive = _thread_ids() - self.threads
        threads = {t.ident: t for t in threading.enumerate()}
        found = []
        for ident in alive:
            thread = threads.get(ident)
            if thread is not None and getattr(thread, _ORIGIN_ATTR, "candidate") == "library":
                continue
            found.append(thread.name if thread is not None else f"thread {ident} (started outside threading)")
        return sorted(found)

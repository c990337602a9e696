"""Snapshots of process state a candidate must leave alone, taken in the worker before the
candidate is imported and compared after it ran.

Three findings: replaced attributes of torch, timers, builtins and this harness (monkey-patching),
changed process-wide torch settings, and threads that the candidate left running. Settings come in
two lists: ``NUMERICS_SETTINGS`` change the numbers the candidate computes (flagged, global_state),
``NEUTRAL_SETTINGS`` only choose among implementations of the same arithmetic, or how many host
threads run it, inside the candidate's own process (noted, not flagged).

Also ``ExecutedLines``, a line tracer for one source file, which tells whether a fallback branch the
static scan found (``Finding.fallback_lines``) ran.
"""

from __future__ import annotations

import builtins
import math
import sys
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
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


# What torch's compiler installs over watched attributes: importing torch._dynamo wraps
# torch.manual_seed, and its first compilation wraps nn.Module.__init__ / __setstate__ (generation
# tagging). A candidate that calls torch.compile, or a library that does, imports it after the
# snapshot; the candidate worker no longer imports it beforehand on the CPU (1.1 s of every
# evaluation's set-up there). Each: the compiler's function that makes the wrapper, the wrapper's
# name, and the free variable holding what it wraps (None: ``__wrapped__``).
_COMPILER_WRAPPERS = {
    "torch.manual_seed": ("torch._compile._disable_dynamo", "inner", None),
    "torch.nn.Module.__init__": ("torch._dynamo.mutation_guard.install_generation_tagging_init", "patched_init",
                                 "init"),
    "torch.nn.Module.__setstate__": ("torch._dynamo.mutation_guard.install_generation_tagging_init",
                                     "patched_setstate", "setstate"),
}


def _installed_by_compiler(qualified: str, value: Any, before_id: int) -> bool:
    """Whether ``value`` is the compiler's own wrapper around the object the snapshot recorded: its
    code is the compiler's nested function's code (the same object for every wrapper it makes) and
    what it wraps is the recorded object itself. A wrapper of anything else, or other code, is not."""
    known = _COMPILER_WRAPPERS.get(qualified)
    code = getattr(value, "__code__", None)
    if known is None or code is None or "torch._dynamo" not in sys.modules:
        return False
    maker_path, wrapper_name, freevar = known
    module_name, maker_name = maker_path.rsplit(".", 1)
    maker = getattr(sys.modules.get(module_name), maker_name, None)
    maker_code = getattr(maker, "__code__", None)
    if maker_code is None or not any(isinstance(c, types.CodeType) and c.co_name == wrapper_name and c is code
                                     for c in maker_code.co_consts):
        return False
    if freevar is None:
        wrapped = getattr(value, "__wrapped__", None)
    elif freevar in code.co_freevars and value.__closure__ is not None:
        wrapped = value.__closure__[code.co_freevars.index(freevar)].cell_contents
    else:
        return False
    return id(wrapped) == before_id


def _autocast_enabled(device: str) -> Callable[[], bool]:
    return lambda: torch.is_autocast_enabled(device)


def _backend(path: str) -> Callable[[], Any]:
    """A getter for torch.backends.<path>: an attribute, or a call when it names a function."""
    def get() -> Any:
        value: Any = torch.backends
        for part in path.split("."):
            value = getattr(value, part)
        return value() if callable(value) else value
    return get


# Settings that change the numbers the candidate computes, or how repeatable they are: flagged.
# TF32 and reduced-precision reductions and matmul precision lower the arithmetic; default dtype and
# device change what the candidate's own tensor factories make; autocast recasts its operations;
# determinism switches decide whether repeated calls agree bit for bit.
# The fp32_precision entries are the same TF32 switches in the newer API.
NUMERICS_SETTINGS: dict[str, Callable[[], Any]] = {
    "default_dtype": lambda: str(torch.get_default_dtype()),
    "default_device": lambda: str(torch.get_default_device()),
    "float32_matmul_precision": torch.get_float32_matmul_precision,
    "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
    "cudnn.deterministic": _backend("cudnn.deterministic"),
    "cudnn.allow_tf32": _backend("cudnn.allow_tf32"),
    "cuda.matmul.allow_tf32": _backend("cuda.matmul.allow_tf32"),
    "cuda.matmul.allow_fp16_reduced_precision_reduction": _backend("cuda.matmul.allow_fp16_reduced_precision_reduction"),
    "cuda.matmul.allow_bf16_reduced_precision_reduction": _backend("cuda.matmul.allow_bf16_reduced_precision_reduction"),
    "cuda.fp16_bf16_reduction_math_sdp_allowed": _backend("cuda.fp16_bf16_reduction_math_sdp_allowed"),
    "fp32_precision": _backend("fp32_precision"),
    "cuda.matmul.fp32_precision": _backend("cuda.matmul.fp32_precision"),
    "cudnn.fp32_precision": _backend("cudnn.fp32_precision"),
    "cudnn.conv.fp32_precision": _backend("cudnn.conv.fp32_precision"),
    "cudnn.rnn.fp32_precision": _backend("cudnn.rnn.fp32_precision"),
    "mkldnn.fp32_precision": _backend("mkldnn.fp32_precision"),
    "mkldnn.matmul.fp32_precision": _backend("mkldnn.matmul.fp32_precision"),
    "mkldnn.conv.fp32_precision": _backend("mkldnn.conv.fp32_precision"),
    "mkldnn.rnn.fp32_precision": _backend("mkldnn.rnn.fp32_precision"),
    "autocast_cpu": _autocast_enabled("cpu"),
    "autocast_cuda": _autocast_enabled("cuda"),
}

# Settings local to the candidate's process that leave its arithmetic alone: noted. cuDNN
# autotuning (benchmark) and on/off, oneDNN on/off, the attention backend and BLAS / linear-algebra
# library choices pick among implementations of the same computation at the same precision; thread
# counts only change how the host runs it; grad mode is overridden by the no_grad every call runs
# under. The reference and the baselines run in another process, so none of them can change those.
NEUTRAL_SETTINGS: dict[str, Callable[[], Any]] = {
    "grad_enabled": torch.is_grad_enabled,
    "num_threads": torch.get_num_threads,
    "num_interop_threads": torch.get_num_interop_threads,
    "cudnn.enabled": _backend("cudnn.enabled"),
    "cudnn.benchmark": _backend("cudnn.benchmark"),
    "cudnn.benchmark_limit": _backend("cudnn.benchmark_limit"),
    "mkldnn.enabled": _backend("mkldnn.enabled"),
    "cuda.flash_sdp_enabled": _backend("cuda.flash_sdp_enabled"),
    "cuda.mem_efficient_sdp_enabled": _backend("cuda.mem_efficient_sdp_enabled"),
    "cuda.math_sdp_enabled": _backend("cuda.math_sdp_enabled"),
    "cuda.cudnn_sdp_enabled": _backend("cuda.cudnn_sdp_enabled"),
    "cuda.preferred_linalg_library": _backend("cuda.preferred_linalg_library"),
    "cuda.preferred_blas_library": _backend("cuda.preferred_blas_library"),
}


def _read(getters: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Current values; a setting this torch lacks reads the same before and after, and one that
    cannot be read (e.g. torch refusing a mix of the old and new TF32 APIs) reads as such."""
    values: dict[str, Any] = {}
    for name, getter in getters.items():
        try:
            value = getter()
        except AttributeError:
            value = "<absent>"
        except Exception as exc:  # a value torch refuses to report is itself a change
            value = f"<unreadable: {type(exc).__name__}>"
        values[name] = value if isinstance(value, (bool, int, float, str, type(None))) else str(value)
    return values


def numerics_settings() -> dict[str, Any]:
    return _read(NUMERICS_SETTINGS)


def neutral_settings() -> dict[str, Any]:
    return _read(NEUTRAL_SETTINGS)


def _changes(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    return sorted(f"{k}: {before.get(k)!r} -> {now.get(k)!r}" for k in now if now.get(k) != before.get(k))


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
    settings: dict[str, Any]  # NUMERICS_SETTINGS
    threads: set[int]
    neutral: dict[str, Any] = field(default_factory=dict)  # NEUTRAL_SETTINGS

    @classmethod
    def take(cls) -> "Snapshot":
        namespaces = _watched_namespaces()
        return cls(
            attributes={name: _identity_map(ns, name.startswith("hercules.")) for name, ns in namespaces.items()},
            settings=numerics_settings(),
            threads=_thread_ids(),
            neutral=neutral_settings(),
        )

    def changed_attributes(self) -> list[str]:
        changed = []
        namespaces = _watched_namespaces()
        for name, before in self.attributes.items():
            after = _identity_map(namespaces[name], name.startswith("hercules.")) if name in namespaces else {}
            for attr, ident in before.items():
                if attr in ("__dict__", "__weakref__") or attr.startswith("_ctypes"):
                    continue
                if after.get(attr) != ident and not _installed_by_compiler(
                        f"{name}.{attr}", vars(namespaces[name]).get(attr) if name in namespaces else None, ident):
                    changed.append(f"{name}.{attr}")
            # New public attributes on torch or the timers are also tampering.
            for attr in after.keys() - before.keys():
                if name in ("torch.Tensor", "torch.cuda.Event", "time", "builtins", "torch.testing"):
                    changed.append(f"{name}.{attr} (added)")
        return sorted(changed)

    def changed_settings(self) -> list[str]:
        """Changed settings that change the numbers (flagged: global_state)."""
        return _changes(self.settings, numerics_settings())

    def changed_neutral_settings(self) -> list[str]:
        """Changed settings that leave the arithmetic alone (noted, never flagged)."""
        return _changes(self.neutral, neutral_settings())

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


class ExecutedLines:
    """A ``sys.settrace`` function that records the line numbers executed in one source file.

    Frames of other files get no local tracer, so library code costs one Python call per frame it
    enters; the candidate's own lines cost one call each. Measured on the 2-core CPU: a forward of
    100 small nn.Modules went from 0.51 to 0.86 ms, about 3.5 us per module call; fine for a
    correctness call, too much to leave on while timing. Use it around the calls to watch
    (``with ExecutedLines(path) as traced: model(*inputs)``, then ``traced.lines``), or install it
    with ``sys.settrace``; tracing covers the calling thread only.
    """

    def __init__(self, filename: str):
        self.filename = filename
        self.lines: set[int] = set()
        self._previous: Any = None

    def __call__(self, frame, event, arg):
        # The global trace function sees only "call" events: it picks the frames to trace.
        return self._local if frame.f_code.co_filename == self.filename else None

    def _local(self, frame, event, arg):
        if event == "line":
            self.lines.add(frame.f_lineno)
        return self._local

    def __enter__(self) -> "ExecutedLines":
        self._previous = sys.gettrace()
        sys.settrace(self)
        return self

    def __exit__(self, *exc) -> None:
        sys.settrace(self._previous)

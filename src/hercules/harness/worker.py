"""The worker process: runs either the trusted reference or one untrusted candidate.

Started by ``hercules.harness.ipc.Worker`` as ``python -m hercules.harness.worker ROLE FD``. It
answers one request at a time over the pipe on FD: each message is parsed into its record
(``requests.py``) and handed to the method registered for that record's type (``@handles``). The
two roles never share a process: the reference's computation, the input generator and the
comparison live outside the candidate's reach, and the clocks this module reads were bound before
any candidate code was imported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import importlib.util
import os
import sys
import time
import traceback
import types
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch

# Bound before any candidate import (see timing.py): the harness keeps its own references.
from hercules.harness import blame, requests
from hercules.harness import timing as _timing
from hercules.harness.checks import KERNELBENCH_TOLERANCE, relative_error
from hercules.harness.datapath import (PackError, PackLayout, PackWriter, fill_pack, open_pack, read_pack, receive_fds,
                                      send_fds, write_pack)
from hercules.harness.integrity import Snapshot, track_thread_origins
from hercules.harness.codec import decode, encode
from hercules.harness.perturb import perturbed_construction
from hercules.harness.records import Tolerance
from hercules.harness.transforms import TRANSFORMS, transform_inputs

_perf_counter = time.perf_counter

CUDA_FATAL_MARKERS = (
    "illegal memory access", "misaligned address", "unspecified launch failure",
    "device-side assert", "illegal instruction", "CUDA error: an illegal",
    "cudaErrorIllegalAddress", "CUBLAS_STATUS_EXECUTION_FAILED", "uncorrectable ECC",
)
DEVICE_MISSING_MARKERS = (
    "Torch not compiled with CUDA", "Found no NVIDIA driver", "No CUDA GPUs are available",
    "CUDA_HOME environment variable is not set", "no CUDA-capable device", "cuda is not available",
    "Cannot find a working triton installation", "0 active drivers",
)

# The driver refusing this process the device (cudaErrorDevicesUnavailable: "busy or unavailable";
# another process holding it in exclusive-process mode, or the driver's own state). On the H100 one
# of 15 KernelBench references (23_EfficientNetB1) got it at setup with five other evaluations in
# flight, and the problem came out runtime_error.
DEVICE_UNAVAILABLE_MARKERS = ("busy or unavailable", "cudaErrorDevicesUnavailable", "CUDA_ERROR_DEVICE_UNAVAILABLE")


def handles(kind: type[requests.Request]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers a worker method as the one answering requests of type ``kind``."""
    def register(method: Callable[..., Any]) -> Callable[..., Any]:
        method.handles = kind  # type: ignore[attr-defined]
        return method
    return register


def classify_exception(exc: BaseException) -> str:
    if isinstance(exc, PackError):
        return "pack"  # a pack this worker was handed is not what its layout claims
    text = f"{type(exc).__name__}: {exc}"
    if any(m.lower() in text.lower() for m in CUDA_FATAL_MARKERS):
        return "crash"
    if any(m.lower() in text.lower() for m in DEVICE_MISSING_MARKERS):
        return "device_missing"
    if any(m.lower() in text.lower() for m in DEVICE_UNAVAILABLE_MARKERS):
        return "device_unavailable"
    return "error"


def load_module(code: str, path: Path, module_name: str):
    """Import source from a real file (Triton and tracebacks need one)."""
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def load_module_from_memory(code: str, module_name: str):
    """The problem never touches the disk, so no candidate can find and read it there."""
    module = types.ModuleType(module_name)
    module.__file__ = f"<{module_name}>"  # PROBLEM_FILE for the problem: its frames carry this name
    sys.modules[module_name] = module
    exec(compile(code, module.__file__, "exec"), module.__dict__)
    return module


def flatten_outputs(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


def to_device(values: list[Any], device: torch.device) -> list[Any]:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def use_device(name: str) -> torch.device:
    """The worker's device, made current: events and streams follow the current device, so
    without this a worker given cuda:1 would time its kernels with events on cuda:0."""
    device = torch.device(name)
    if device.type == "cuda":
        # Plain "cuda" means the current device; set_device wants an index.
        device = torch.device("cuda", torch.cuda.current_device() if device.index is None else device.index)
        torch.cuda.set_device(device)
        # Every party computes in strict fp32: the truth is computed with TF32 off, so the candidate
        # and the baselines run that way too. PyTorch's default leaves cuDNN convolutions on TF32:
        # on the H200 the KernelBench reference of a ConvTranspose3d problem, run as a candidate
        # under that default, put 17,866 values past atol=rtol=1e-3 (max error 3.7e-3) and was
        # judged wrong, while the eager baseline timed the faster TF32 convolution. A candidate
        # that turns TF32 back on is still seen (integrity snapshot of global settings, downcast check).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        # Host-side work here is input generation and copies. Several evaluations in flight, each
        # with two workers whose thread pools default to every core, oversubscribe the host (and
        # the compilers sharing it); the GPU does the timed work, so a few threads are enough.
        torch.set_num_threads(int(os.environ.get("HERCULES_WORKER_THREADS", "2")))
    return device


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        _timing._synchronize(device)


class StrictPrecision:
    """TF32 off while the reference computes the numbers candidates are judged against."""

    def __enter__(self):
        self.saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self.saved


def build_model(module, class_name: str, init_inputs: list, init_seed: int, device, dtype,
                perturb_seed: int | None = None):
    """``perturb_seed``: parameters and buffers then drawn away from their defaults (perturb.py),
    in the problem's dtype, the same way in both workers."""
    cls = getattr(module, class_name, None)
    if cls is None:
        raise LookupError(f"source defines no {class_name}")
    torch.manual_seed(init_seed)
    work = torch.device(device) if torch.device(device).type == "cuda" else None
    with perturbed_construction(perturb_seed, work):  # values move where they are made (perturb.py)
        model = cls(*init_inputs)
    if isinstance(model, torch.nn.Module):
        model = model.to(device)
        if dtype != torch.float32:
            model = model.to(dtype)
        model.eval()
    return model


# The most of the device's free memory a pack reserved ahead of a timed request may take.
RESERVE_FREE_SHARE = 0.25


class PackEnds:
    """How a worker hands tensors over: sealed host memory files until the parent's data-path probe
    has shown that device packs cross from this worker to the other and back."""

    medium = "memfd"
    device = torch.device("cpu")

    def _pack_reply(self, outs: list[Any], fields: dict[str, Any], into: dict[str, Any] | None = None,
                    fds: list[int] | None = None) -> dict[str, Any]:
        """Outputs as a pack: exact tensors only; anything else (a subclass included) is sent as a
        type name, since converting it would run its code where the comparison happens. Where the
        request brought a destination (``into``: its layout; its descriptor last among the
        request's) and the outputs fit it, they are written there and the parent seals it."""
        types = [_type_name(o) for o in outs]
        started = _perf_counter()
        if into is not None:
            layout = PackLayout.from_message(into)
            if fill_pack(fds[-1], layout, outs):
                return {**fields, "layout": layout.to_message(), "types": types, "fds": 0, "into": True,
                        "pack_ms": (_perf_counter() - started) * 1e3}
        plain = [o if type(o) is torch.Tensor else None for o in outs]
        # Outputs keep their layout: a transposed result is not made contiguous inside the burst
        # the parent times (datapath.dense_strides).
        fd, layout = write_pack(plain, "outputs", self.medium, self.device, keep_layout=True)
        # Reported for diagnosis only (the parent's calibration is its own): how long the packing
        # took in this process.
        pack_ms = (_perf_counter() - started) * 1e3
        return {**fields, "layout": layout.to_message(), "types": types, "fds": 1, "_fds": [fd], "pack_ms": pack_ms}

    def _written_as_called(self, fn: Callable[..., Any], arg_sets: list[tuple], calls: int, into: dict[str, Any],
                           fds: list[int], watch: Callable[[int, list[Any]], None] | None = None, copy: bool = False,
                           fields: dict[str, Callable[[], Any]] | None = None) -> dict[str, Any]:
        """A burst whose every call's outputs are written into the destination as the call ends and
        freed (on the CPU: kept to the end instead, the calls wrote 62 MB of fresh memory where a
        plain burst reuses one 2 MB output that stays in cache, and an honest 0.077 ms elementwise
        call read 0.25 ms per call on the 2-core VM). Outputs that do not fit it (shapes or dtypes
        of their own: fp16 for an fp32 problem) are all kept and packed after the burst instead.
        ``watch`` sees each call's outputs; ``copy`` keeps copies (a function that hands back the
        same buffers every call); ``fields`` are read after the burst into the reply."""
        layout = PackLayout.from_message(into)
        writer = PackWriter(fds[-1], layout)
        if len(layout.slots) % max(calls, 1):
            raise PackError(f"a destination of {len(layout.slots)} outputs for {calls} calls")
        per_call = len(layout.slots) // max(calls, 1)
        kept: list[Any] = []

        def sink(index: int, out: Any) -> None:
            outs = _timing.call_outputs(out)
            if watch is not None:
                watch(index, outs)
            if kept or (index == 0 and (len(outs) != per_call or not writer.fits(0, outs))):
                kept.append(_timing.copied_outputs(out) if copy else out)
                return
            if len(outs) != per_call:
                raise PackError(f"call {index} returned {len(outs)} outputs, the destination holds {per_call}")
            writer.write(index * per_call, outs)  # refused if a later call's outputs differ

        _, enqueue = _timing.burst_outputs(fn, arg_sets, self.device, calls, every_call=True, sink=sink)
        reply = {"enqueue_ms": enqueue, **{name: read() for name, read in (fields or {}).items()}}
        if kept:
            return self._pack_reply([o for out in kept for o in _timing.call_outputs(out)], reply)
        return {**reply, "layout": layout.to_message(), "types": ["torch.Tensor"] * len(layout.slots), "fds": 0,
                "into": True}

    @handles(requests.Datapath)
    def op_datapath(self, request: requests.Datapath, fds: list[int]):
        """Use ``medium`` for every later pack this worker writes."""
        medium = str(request.medium)
        if medium not in ("memfd", "cuda"):
            raise ValueError(f"unknown pack medium {medium!r}")
        self.medium = medium
        return {}

    @handles(requests.Reserve)
    def op_reserve(self, request: requests.Reserve, fds: list[int]):
        """The next device pack's allocation made now, off the clock of the request that fills it.
        Not where packs are host files, nor where it would take more than RESERVE_FREE_SHARE of the
        device's free memory: held through the calls (whose temporaries it would otherwise not
        meet), it must not be what runs a multi-GB problem out of memory. Without it, or where the
        driver refuses it, the request that writes the pack allocates its own, as before."""
        if self.medium == "cuda" and self.device.type == "cuda":
            from hercules.harness.device_pack import drop_spare, reserve

            drop_spare()
            with contextlib.suppress(Exception):  # a reservation only moves work off the clock
                free, _total = torch.cuda.mem_get_info(self.device)
                if int(request.nbytes) <= free * RESERVE_FREE_SHARE:
                    reserve(int(request.nbytes), self.device)
        return {}


class _SizedCache(dict):
    """Entries by seed, oldest first, with each one's bytes counted once when it is kept: a pass
    keeps up to 256 sets on a GPU, and summing every set's tensors at each addition would cost
    O(sets^2) per pass. Entries come and go through ``keep`` and ``drop`` only."""

    def __init__(self):
        super().__init__()
        self.sizes: dict[int, int] = {}

    def keep(self, seed: int, entry: Any, nbytes: int) -> None:
        self[seed] = entry
        self.sizes[seed] = nbytes

    def drop(self, seed: int) -> None:
        self.pop(seed)
        self.sizes.pop(seed)

    def nbytes(self) -> int:
        return sum(self.sizes.values())


PROBLEM_MODULE = "hercules_problem"
PROBLEM_FILE = f"<{PROBLEM_MODULE}>"


class ReferenceWorker(PackEnds):
    """Trusted: the problem's Model, its inputs, the float64 truth, the comparison of a candidate's
    outputs with it (on the device, so only figures leave this process), baselines and roofline."""

    # Inputs and truths are regenerated from their seed when evicted (deterministic on one device),
    # so only a few sets occupy the device: KernelBench inputs reach several GB each (21_Sigmoid:
    # 6.4 GB in, 6.4 GB out, 12.8 GB of float64 truth per set). At most KEEP_SETS sets, and at most
    # CACHE_FRACTION of the device's memory for inputs and expected outputs together; the set in
    # use is always kept. The input sets of the latest ``inputs_many`` are all kept (bytes allowing):
    # a fresh pass's comparison needs every one of them again, and at three sets it made 29 of 32
    # again from their seeds, as did each calibration going round the trial seeds (on the 2-core
    # CPU 0.22 s per pack of scale_add's 32 sets, ten packs per evaluation).
    KEEP_SETS = 3
    CACHE_FRACTION = 0.2
    IDLE_RESERVED_BYTES = 256 << 20

    def __init__(self):
        self.inputs: _SizedCache = _SizedCache()  # seed -> input values
        self.transformed: dict[int, str] = {}  # seed -> the transform its set is made with (transforms.py)
        self.plain_scales: list[float] | None = None  # each output's noise on a set not transformed
        self.plain_magnitudes: list[float | None] | None = None  # ... and its rms there
        self.expected: _SizedCache = _SizedCache()  # seed -> outputs and truth (``_compute_expected``)
        # seed -> problem-dtype outputs alone (``_expected_light``): a burst's calls go round a few
        # timing buffers, and computing the reference again for every judged call was most of a CPU
        # evaluation (red team scale_add_outbuf: 58 compare requests, 37.0 s of 73 s, loaded)
        self.light: _SizedCache = _SizedCache()
        self.pass_sets = 0  # distinct sets of the latest inputs_many, kept with the others
        self.baselines: dict[str, tuple[Callable[..., Any], list[tuple]]] = {}
        self.baseline_seeds: dict[str, tuple[int, ...]] = {}  # the seeds each baseline's sets are made of
        self.compiled: dict[str, Callable[..., Any]] = {}  # compiled ahead by baseline_compile

    # Requests that run the problem's code and little else: whatever they raise is the problem's.
    FOREIGN_OPS = frozenset({"setup"})

    def foreign_code(self) -> blame.ForeignCode:
        return blame.ForeignCode(files=frozenset({PROBLEM_FILE}),
                                 objects=(getattr(self, "model", None), getattr(self, "model64", None)))

    @handles(requests.Setup)
    def op_setup(self, request: requests.Setup, fds: list[int]):
        self.device = use_device(request.device)
        self.dtype = getattr(torch, request.dtype)
        self.tol = Tolerance(**request.tolerance)
        self.module = load_module_from_memory(request.code, PROBLEM_MODULE)
        self.code = request.code
        torch.manual_seed(request.init_seed)
        self.init_inputs = list(self.module.get_init_inputs())
        self.model = build_model(self.module, "Model", self.init_inputs, request.init_seed, self.device, self.dtype)
        try:
            model64 = build_model(self.module, "Model", self.init_inputs, request.init_seed, self.device, self.dtype)
            self.model64 = model64.to(torch.float64) if isinstance(model64, torch.nn.Module) else None
        except Exception:  # some modules cannot run in float64; judge against the dtype reference
            self.model64 = None
        params = sum(p.numel() * p.element_size() for p in self.model.parameters()) if isinstance(
            self.model, torch.nn.Module) else 0
        buffers = sum(b.numel() * b.element_size() for b in self.model.buffers()) if isinstance(
            self.model, torch.nn.Module) else 0
        perturbation = self._perturb(request.init_seed, request.perturb_seed)
        return {"init_inputs": self.init_inputs, "param_bytes": params + buffers, **perturbation}

    def _perturb(self, init_seed: int, seed: int | None) -> dict[str, Any]:
        """Both models replaced by ones whose parameters and buffers are drawn away from their
        defaults with ``seed`` (the candidate's is built the same way), when the reference stays
        right with them: finite and within its usual error of float64 on one input set made from
        the seed (``oracle.skip_reason``). ``perturbed`` says whether it was; ``why`` why not."""
        from hercules.harness import oracle

        if seed is None or not isinstance(self.model, torch.nn.Module) or not any(
                t.is_floating_point() and t.numel() for t in [*self.model.parameters(), *self.model.buffers()]):
            return {"perturbed": False, "why": None}
        try:
            model = build_model(self.module, "Model", self.init_inputs, init_seed, self.device, self.dtype,
                                perturb_seed=seed)
            model64 = None
            if self.model64 is not None:
                model64 = build_model(self.module, "Model", self.init_inputs, init_seed, self.device,
                                      self.dtype, perturb_seed=seed).to(torch.float64)
            torch.manual_seed(seed)
            with torch.device(self.device):
                values = to_device(list(self.module.get_inputs()), self.device)
            usual = _reference_figures(*_run_reference(self.model, self.model64, values))
            found = _reference_figures(*_run_reference(model, model64, values))
        except Exception as exc:  # the problem's code failed with perturbed parameters
            found, usual = {"error": f"{type(exc).__name__}: {exc}"}, {}
        reason = oracle.skip_reason(oracle.ReferenceOnTransform.from_reply(oracle.PARAMETERS, found),
                                    usual.get("ref_err"), self.tol)
        if reason is not None:
            return {"perturbed": False, "why": reason}
        self.model, self.model64 = model, model64
        return {"perturbed": True, "why": None}

    def _cache_budget(self) -> int:
        return int(_timing.device_memory_bytes(self.device) * self.CACHE_FRACTION)

    def _cached_bytes(self) -> int:
        return self.inputs.nbytes() + self.expected.nbytes() + self.light.nbytes()

    def _evict(self, keep_seed: int) -> None:
        """Oldest first, never ``keep_seed``: until within KEEP_SETS (inputs: or the latest pass's
        sets) and the byte budget."""
        budget = self._cache_budget()
        for cache, most in ((self.light, self.KEEP_SETS), (self.expected, self.KEEP_SETS),
                            (self.inputs, max(self.KEEP_SETS, self.pass_sets))):
            while len(cache) > most or (len(cache) > 1 and self._cached_bytes() > budget):
                cache.drop(next(seed for seed in cache if seed != keep_seed))
        self._return_free_memory()

    def _return_free_memory(self) -> None:
        """Hand blocks the allocator holds but no tensor uses back to the device. Freed sets and the
        float64 temporaries of a truth (twice the inputs' size) otherwise stay reserved in this
        process: on the H200 a neighbouring evaluation's reference worker held 66.6 GB while 26_GELU's
        needed 12 GB more, and both multi-GB problems ran out of memory."""
        if self.device.type == "cuda":
            idle = torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device)
            if idle > self.IDLE_RESERVED_BYTES:
                torch.cuda.empty_cache()

    def _on_device(self, make: Callable[[], Any], keep_seed: int) -> Any:
        """``make()``; when the device runs out of memory, again once with every cached set but
        ``keep_seed`` dropped (a multi-GB problem fits a cache of one set, not of three)."""
        try:
            return make()
        except torch.OutOfMemoryError:
            for cache in (self.light, self.expected, self.inputs):
                for seed in [s for s in cache if s != keep_seed]:
                    cache.drop(seed)
            self.baselines.clear()
            self.baseline_seeds.clear()
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            return make()

    def _inputs(self, seed: int) -> list[Any]:
        """The input set of ``seed``, made on the device (factories without a device argument
        allocate there): fast for GB-sized inputs, and nothing large is made on the host."""
        if seed not in self.inputs:
            def make():
                torch.manual_seed(seed)
                with torch.device(self.device):
                    values = list(self.module.get_inputs())
                values = to_device(values, self.device)
                name = self.transformed.get(seed)
                return transform_inputs(values, name) if name else values

            values = self._on_device(make, seed)
            self.inputs.keep(seed, values, _timing.set_bytes(values))
            self._evict(seed)
        return self.inputs[seed]

    @handles(requests.Inputs)
    def op_inputs(self, request: requests.Inputs, fds: list[int]):
        """A trial's inputs as a sealed pack for the candidate; kept here by seed. With a
        ``transform`` (transforms.py), the set of that seed transformed, from then on."""
        if request.transform is not None:
            self._transform(int(request.seed), str(request.transform))
        values = self._inputs(request.seed)
        fd, layout = write_pack(values, "inputs", self.medium, self.device)
        signature = [f"{tuple(v.shape)}:{v.dtype}" if isinstance(v, torch.Tensor) else repr(v) for v in values]
        nbytes = _timing.set_bytes(values)
        return {"layout": layout.to_message(), "signature": signature, "input_bytes": nbytes, "fds": 1, "_fds": [fd]}

    def _expected(self, seed: int) -> dict[str, Any]:
        """The problem-dtype outputs and the float64 truth for ``seed``, on the device."""
        if seed in self.expected:
            return self.expected[seed]
        entry = self._on_device(lambda: self._compute_expected(seed), seed)
        distinct = [*entry["outputs"], *entry["dtype_outputs"]] if entry["outputs"] is not entry["dtype_outputs"] \
            else entry["outputs"]
        self.expected.keep(seed, entry, _timing.set_bytes(distinct))
        self._evict(seed)
        return entry

    def _expected_light(self, seed: int) -> dict[str, Any]:
        """The problem-dtype outputs for ``seed`` (no float64 run), unless the full entry is already
        at hand; kept like the full entries (a few, within the byte budget)."""
        if seed in self.expected:
            return self.expected[seed]
        if seed in self.light:
            return self.light[seed]
        values = self._inputs(seed)
        with torch.no_grad(), StrictPrecision():
            outs = flatten_outputs(self.model(*values))
        specs = [{"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", "")} for o in outs]
        entry = {"outputs": outs, "dtype_outputs": outs, "specs": specs, "ref_errs": None, "call_ms": 0.0,
                 "light": True}
        self.light.keep(seed, entry, _timing.set_bytes(outs))
        self._evict(seed)
        return entry

    def _compute_expected(self, seed: int) -> dict[str, Any]:
        values = self._inputs(seed)
        with torch.no_grad(), StrictPrecision():
            synchronize(self.device)
            start = _perf_counter()
            outs = flatten_outputs(self.model(*values))
            synchronize(self.device)
            call_ms = (_perf_counter() - start) * 1e3
            truth = None
            if self.model64 is not None:
                try:
                    upcast = [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                              for v in values]
                    truth = flatten_outputs(self.model64(*upcast))
                    del upcast  # float64 copies of the inputs: twice their size, not kept
                except torch.OutOfMemoryError:
                    raise
                except Exception:
                    truth = None
        for o in outs:
            if not isinstance(o, torch.Tensor):
                raise TypeError(f"reference returned {type(o).__name__}, not a tensor")
        specs = [{"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", "")} for o in outs]
        if truth is not None and all(isinstance(t, torch.Tensor) and t.shape == o.shape for t, o in zip(truth, outs)):
            ref_errs = [relative_error(o, t) for o, t in zip(outs, truth)]  # per output
            expected = truth
        else:  # no float64 run: judged against the problem-dtype reference, downcast check off
            ref_errs = None
            expected = outs
        # Each output's size (rms) and rounding noise (the problem-dtype reference's rms error
        # against the truth).
        magnitudes = [_rms(t) for t in expected]
        scales = [None if err is None or rms is None else err * rms
                  for err, rms in zip(ref_errs, magnitudes)] if ref_errs is not None else None
        if seed not in self.transformed and self.plain_scales is None:
            self.plain_scales, self.plain_magnitudes = scales, magnitudes
        return {"outputs": expected, "dtype_outputs": outs, "specs": specs, "ref_errs": ref_errs,
                "call_ms": call_ms, "scales": scales, "magnitudes": magnitudes}

    def _tolerance_for(self, seed: int, entry: dict[str, Any]) -> Tolerance:
        """The trials' tolerance, its atol grown on a transformed set as far as the problem-dtype
        reference's own rounding noise grew there (its rms error against the float64 truth, the
        least grown output deciding): atol is an absolute error for the problem's own values.
        Inputs x100 make a product's outputs, and its rounding errors, 1e4 larger; at atol = 1e-3
        an honest fp32 kernel summing in another order than the reference (CUDA-L1, KernelBench
        level 1 #15) missed 12 of 16M values by up to 2.69 on outputs of ~6e5. A softmax's noise
        does not grow with its inputs, nor its atol. Never tighter than the trials' (x0.01).

        ...or as far as the output itself grew (its rms), where that is more: the reference's noise
        is its own summation order's, and another order's grows with the values it sums. CUDA-L1's
        kernel for KernelBench level 2 #50 (a fused ConvTranspose3d, pooling and scalings; relative
        error 5.4e-6 in the trials against the reference's 3.5e-8) missed 1 of 29.5M values on
        inputs x100 by 0.0040 where the reference's noise had grown the atol only 2.7x (0.0027)."""
        scales, plain = entry.get("scales"), self.plain_scales
        if seed not in self.transformed or not scales or not plain or len(scales) != len(plain) \
                or any(not now or not was for now, was in zip(scales, plain)):
            return self.tol
        sizes, plain_sizes = entry.get("magnitudes") or [], self.plain_magnitudes or []
        if len(sizes) != len(scales) or len(plain_sizes) != len(plain) \
                or any(not now or not was for now, was in zip(sizes, plain_sizes)):
            sizes, plain_sizes = scales, plain  # no size to go by: the noise alone
        growth = min(max(1.0, now / was, size / was_size)
                     for now, was, size, was_size in zip(scales, plain, sizes, plain_sizes))
        return dataclasses.replace(self.tol, atol=self.tol.atol * growth)

    @handles(requests.DatapathOffer)
    def op_datapath_offer(self, request: requests.DatapathOffer, fds: list[int]):
        """A probe in device memory, with no host fallback: the first leg of the parent's check that
        device packs cross to the candidate's process and back."""
        from hercules.harness.device_pack import probe_values, write_device_pack

        fd, layout = write_device_pack(probe_values(int(request.seed), self.device), self.device)
        return {"layout": layout.to_message(), "fds": 1, "_fds": [fd]}

    @handles(requests.DatapathConfirm)
    def op_datapath_confirm(self, request: requests.DatapathConfirm, fds: list[int]):
        """The candidate's copy of the probe, back as a device pack: the same bytes, or device packs
        are not used for this evaluation."""
        from hercules.harness.device_pack import probe_values

        layout = PackLayout.from_message(request.layout)
        if layout.medium != "cuda":
            return {"same": False, "why": f"the probe came back as a {layout.medium} pack"}
        got = read_pack(fds[0], layout, self.device)
        want = probe_values(int(request.seed), self.device)
        same = len(got) == len(want) and all(
            type(g) is torch.Tensor and g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w)
            for g, w in zip(got, want))
        return {"same": same, "why": "" if same else "the probe's bytes changed on the way back"}

    @handles(requests.Footprint)
    def op_footprint(self, request: requests.Footprint, fds: list[int]):
        """Bytes of one input set, the weights and one call's outputs, from a forward on the meta
        device (nothing allocated, nothing computed); outputs None when that forward fails."""
        from hercules.problems.footprint import footprint

        found = footprint(self.code, "problem", forward=True, limit_s=float(request.limit_s),
                          count_flops=False)
        return {"input_bytes": found.input_bytes, "weight_bytes": found.weight_bytes,
                "output_bytes": found.output_bytes, "error": found.error}

    def _transform(self, seed: int, name: str) -> None:
        if name not in TRANSFORMS:
            raise ValueError(f"unknown transform {name!r}")
        if self.transformed.get(seed) != name:
            for cache in (self.inputs, self.expected, self.light):
                if seed in cache:
                    cache.drop(seed)
            self.transformed[seed] = name

    @handles(requests.TransformCheck)
    def op_transform_check(self, request: requests.TransformCheck, fds: list[int]):
        """The problem's reference on the set of ``seed`` under ``transform``: whether it stays
        finite and how far it is from the float64 truth there (the parent decides, oracle.py).
        The outputs and truth are kept for judging the candidate on the same set."""
        seed = int(request.seed)
        self._transform(seed, str(request.transform))
        try:
            entry = self._expected(seed)
        except Exception as exc:  # the problem's code fails on these values: not meaningful here
            return {"error": f"{type(exc).__name__}: {exc}"[:500]}
        figures = _reference_figures(entry["dtype_outputs"], None)
        has_truth = entry["ref_errs"] is not None
        ref_err = max(entry["ref_errs"], default=0.0) if has_truth else None
        return {**figures, "has_truth": has_truth, "ref_err": ref_err}

    @handles(requests.Dependence)
    def op_dependence(self, request: requests.Dependence, fds: list[int]):
        """Which inputs the reference's outputs depend on (dependence.py): the set of the first of
        ``seeds`` against the others', exactly. The names and signatures label the inputs."""
        import inspect

        from hercules.harness.dependence import find_dependence

        seeds = [int(s) for s in request.seeds]
        try:
            sets = [list(self._inputs(s)) for s in seeds]
            outputs = [self._expected_light(s)["dtype_outputs"] for s in seeds]

            def run(values: list[Any]) -> list[Any]:
                with torch.no_grad(), StrictPrecision():
                    return flatten_outputs(self.model(*values))

            found = find_dependence(run, sets[0], sets[1:], outputs[0], outputs[1:])
        except Exception as exc:  # the problem's code failed on a mixed set: dependence unknown
            return {"error": f"{type(exc).__name__}: {exc}"[:500]}
        try:
            names = [p.name for p in inspect.signature(self.model.forward).parameters.values()
                     if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError, AttributeError):
            names = []
        signature = [f"{tuple(v.shape)}:{str(v.dtype).replace('torch.', '')}" if isinstance(v, torch.Tensor)
                     else repr(v)[:40] for v in sets[0]]
        return {"ignored": list(found.ignored), "testable": list(found.testable), "constant": found.constant,
                "ignored_bytes": found.ignored_bytes, "names": names, "signature": signature}

    @handles(requests.Specs)
    def op_specs(self, request: requests.Specs, fds: list[int]):
        entry = self._expected(request.seed)
        return {"specs": entry["specs"], "ref_errs": entry["ref_errs"], "call_ms": entry["call_ms"]}

    @handles(requests.InputsMany)
    def op_inputs_many(self, request: requests.InputsMany, fds: list[int]):
        """The input sets of several seeds in one pack, set after set (``per_set`` values each): the
        values of a fresh pass, which travel with the request that times it."""
        seeds = [int(seed) for seed in request.seeds]
        distinct = list(dict.fromkeys(seeds))  # a seed repeated is made once
        self.pass_sets = len(distinct)
        made = {seed: self._inputs(seed) for seed in distinct}
        values = [v for seed in seeds for v in made[seed]]
        fd, layout = write_pack(values, "inputs", self.medium, self.device)
        return {"layout": layout.to_message(), "per_set": len(values) // max(len(request.seeds), 1), "fds": 1,
                "_fds": [fd]}

    @handles(requests.Compare)
    def op_compare(self, request: requests.Compare, fds: list[int]):
        """The candidate's outputs (a pack it can no longer change, or a device pack copied here
        before anything is judged) against the truth: of ``seed``, or call after call of a burst
        against ``seeds`` (``None`` where a call is not judged)."""
        from hercules.harness.checks import compare_outputs, within_allclose

        seeds = list(request.seeds) if request.seeds is not None else [request.seed]
        layout = PackLayout.from_message(request.layout)
        types = list(request.types)
        if not seeds or len(layout.slots) % len(seeds) or len(types) != len(layout.slots):
            raise PackError(f"{len(layout.slots)} outputs do not split into {len(seeds)} calls")
        per_call = len(layout.slots) // len(seeds)
        judged = [i for i, seed in enumerate(seeds) if seed is not None]
        # The calls the parent drew (``strict``; the last judged one when it names none) against
        # the float64 truth; the others of a burst against the problem-dtype reference, loosely:
        # they show that each call ran on its own values (a skipped call hands in another set's
        # results, relative error ~1). A float64 truth per call made the CPU passes 2.4x slower.
        strict = {int(i) for i in request.strict or ()} & set(judged) or {judged[-1]}
        entries = {i: self._expected(int(seeds[i])) if i in strict else self._expected_light(int(seeds[i]))
                   for i in judged}
        outputs: list[Any] = []
        with open_pack(fds[0], layout, self.device) as pack:
            # Shapes and dtypes are judged from the layout before any byte is copied.
            for i, entry in entries.items():
                chunk = layout.slots[i * per_call:(i + 1) * per_call]
                if len(entry["specs"]) != per_call or any(
                        slot is not None and (list(slot.shape) != list(spec["shape"]) or slot.dtype != spec["dtype"])
                        for slot, spec in zip(chunk, entry["specs"])):
                    break
            else:
                # A memory-file pack is sealed: nothing can change it, so it is judged where it lies
                # (a 32-call burst of 2 MB outputs was a 64 MB copy before each CPU comparison). A
                # device pack is copied here first: its sender could still write to that memory.
                outputs = pack.values(self.device, clone=False)
            if not outputs:
                outputs = [None if s is None else _Meta(s.shape, s.dtype) for s in layout.slots]
            correct, kernelbench, max_abs, rel, flags, problems, ref_errs = True, True, 0.0, 0.0, set(), [], []
            strict_rel, strict_ref = 0.0, None
            for i, entry in entries.items():
                span = slice(i * per_call, (i + 1) * per_call)
                light = entry.get("light", False)
                tol = self._tolerance_for(int(seeds[i]), entry)
                comparison = compare_outputs(outputs[span], types[span], entry["outputs"], entry["specs"],
                                             _loosened(tol) if light else tol, entry["ref_errs"],
                                             entry["dtype_outputs"])
                if not light:
                    kernelbench = kernelbench and within_allclose(outputs[span], types[span], entry["dtype_outputs"],
                                                                  KERNELBENCH_TOLERANCE)
                    strict_rel = max(strict_rel, comparison.rel_err)
                    if entry["ref_errs"] is not None:
                        strict_ref = max(strict_ref or 0.0, max(entry["ref_errs"], default=0.0))
                correct = correct and comparison.ok
                max_abs, rel = max(max_abs, comparison.max_abs_err), max(rel, comparison.rel_err)
                flags |= set(comparison.flags)
                prefix = f"call {i + 1} of {len(seeds)}: " if len(seeds) > 1 else ""
                problems += [prefix + p for p in comparison.problems]
                if entry["ref_errs"] is not None:
                    ref_errs.append(max(entry["ref_errs"], default=0.0))
        call_ms = max((entry["call_ms"] for entry in entries.values()), default=0.0)
        return {"correct": correct, "max_abs_err": max_abs, "rel_err": rel, "flags": sorted(flags),
                "problems": problems[:5], "ref_err": max(ref_errs) if ref_errs else None,
                "ok_kernelbench": kernelbench, "ref_call_ms": call_ms,
                "strict_rel_err": strict_rel, "strict_ref_err": strict_ref}

    # ---- measurements (the parent holds the device for these) ------------------------------
    @handles(requests.BaselineCompile)
    def op_baseline_compile(self, request: requests.BaselineCompile, fds: list[int]):
        """torch.compile's compilation of a compiled baseline, on one input set, before the parent
        holds any section of the device: seconds of host work whose device work is that one call.
        ``baseline_prepare`` then takes the compiled function as it is."""
        from hercules.harness.baselines import COMPILED, make_baseline

        name = request.name
        if name not in COMPILED:
            raise ValueError(f"{name} is not a compiled baseline")
        args = tuple(self._inputs(int(request.seed)))
        with torch.no_grad():
            fn = make_baseline(name, self.model, [args], self.device)
            fn(*args)
        synchronize(self.device)
        self.compiled[name] = fn
        return {}

    @handles(requests.BaselinePrepare)
    def op_baseline_prepare(self, request: requests.BaselinePrepare, fds: list[int]):
        """Build one baseline (compile, capture) and run it once on every set: compilation happens
        here, outside the exclusive section; timing it is a separate request."""
        from hercules.harness.baselines import make_baseline

        name = request.name
        # Baselines over the same seeds share one copy of the sets (trusted code on both): eager
        # stays prepared while the others are timed against it in the same rounds, and a second
        # copy of sixteen rotation sets would double the worker's largest allocation.
        sets = next((self.baselines[other][1] for other, seeds in self.baseline_seeds.items()
                     if seeds == tuple(request.seeds) and other in self.baselines), None)
        if sets is None:
            sets = _timing.rotation_sets([tuple(self._inputs(s)) for s in request.seeds], self.device)
        reply: dict[str, Any] = {}
        with torch.no_grad():
            if name == "expert":
                fn, reply["expert"] = self._choose_expert(request.expert_op, request.seeds[0], sets)
                if fn is None:
                    return reply  # the report says why each implementation is not usable
            else:
                fn = self.compiled.pop(name, None)
                if fn is None:
                    fn = make_baseline(name, self.model, sets, self.device)
            for args in sets:
                fn(*args)
        synchronize(self.device)
        self.baselines[name] = (fn, sets)
        self.baseline_seeds[name] = tuple(request.seeds)
        return reply

    def _choose_expert(self, op: str, seed: int, sets: list[tuple]) -> tuple[Callable[..., Any] | None, dict[str, Any]]:
        """The fastest implementation of ``op`` that is correct against this problem's float64
        truth on the set of ``seed`` (``sets[0]``), if any, and the report of each one's fate."""
        from hercules.experts.choose import choice_time_ms, choose
        from hercules.harness import triton_compat
        from hercules.harness.checks import compare_outputs

        triton_compat.apply()  # Triton experts on the CPU run under the interpreter
        entry = self._expected(seed)

        def judge(outputs: Any) -> str | None:
            outs = flatten_outputs(outputs)
            comparison = compare_outputs(outs, [_type_name(o) for o in outs], entry["outputs"], entry["specs"],
                                         self.tol, entry["ref_errs"], entry["dtype_outputs"])
            return None if comparison.ok else "; ".join(comparison.problems[:2]) or "incorrect"

        def time_ms(kernel: Callable[..., Any]) -> float:
            return choice_time_ms(kernel, sets, self.device)

        return choose(op, self.model, sets, judge, time_ms)

    @handles(requests.BaselineTime)
    def op_baseline_time(self, request: requests.BaselineTime, fds: list[int]):
        fn, sets = self.baselines[request.name]
        with torch.no_grad():
            result = _timing.time_callable(fn, sets, device=self.device, budget_s=request.budget_s,
                                           warmup_s=request.warmup_s, wall_check=False)
        return {"timing": result.__dict__}

    @handles(requests.Burst)
    def op_burst(self, request: requests.Burst, fds: list[int]):
        """Back-to-back calls of a baseline, then its last outputs as a pack: the same procedure the
        candidate's burst follows, so both sides of a ratio pay the same overheads. ``calls = 0``
        packs outputs of the same sizes without calling anything (the parent's calibration)."""
        calls = int(request.calls)
        if calls == 0:
            if request.layout is not None:
                # A fresh pass's values arrive with its request: each copied once into memory of
                # this process, as the candidate's fresh_burst places them. A second copy of every
                # value here made the calibration longer than the candidate's own hand-over, and
                # its fresh passes read faster than they ran.
                read_pack(fds[0], request.layout, self.device)
            # The reference's own outputs for that seed, already made and kept: real values in
            # memory the process has written, like a burst's outputs. Not zeros made here: filling
            # 6.4 GB inside this request (KernelBench's level 1 activations; ~1.3 ms at the H200's
            # 4.8 TB/s) counted as overhead every burst pays, and eager's own bursts then read
            # 1.4-2.6 ms a call for a 2.7 ms roofline. Not ``torch.empty`` either: on a GPU a
            # multi-GB one may need the driver inside this request, and on the CPU its untouched
            # pages read as the kernel's one zero page (scale_add's 32 outputs of 2 MB packed in
            # 9.7 ms that way against 10.4 ms real, on the 2-core VM).
            outs = list(self._expected(request.seed)["dtype_outputs"])
            outs = outs * int(request.outputs_of)  # every call's outputs: as many bytes again
            synchronize(self.device)
            fields = {"enqueue_ms": 0.0}
        elif request.every_call:
            # Timed beside a candidate's burst whose every call comes back: the same hand-over, so
            # both sides of the round's ratio pay the same.
            fn, sets = self.baselines[request.name]
            with torch.no_grad():
                if request.into is not None and self.device.type == "cpu":
                    return self._written_as_called(fn, sets, calls, request.into, fds,
                                                   fields={"executed_lines": list})
                with _timing.DeviceClock(self.device, calls) as clock:
                    per_call, enqueue = _timing.burst_outputs(fn, sets, self.device, calls, every_call=True)
            outs = [o for call in per_call for o in call]
            fields = {"enqueue_ms": enqueue, "device_ms": clock.ms()}
        else:
            fn, sets = self.baselines[request.name]
            with torch.no_grad():
                outs, enqueue = _timing.burst_outputs(fn, sets, self.device, calls)
            fields = {"enqueue_ms": enqueue}
        return self._pack_reply(outs, {**fields, "executed_lines": []}, request.into, fds)

    @handles(requests.InputsIntact)
    def op_inputs_intact(self, request: requests.InputsIntact, fds: list[int]):
        """Whether the candidate's timing buffers (a pack of every set, in order) still hold the
        values of their seeds: inputs changed by calls after the trials, whose own check of
        mutation saw only five calls. Exact comparison: an honest call writes no input."""
        seeds = [int(seed) for seed in request.seeds]
        layout = PackLayout.from_message(request.layout)
        per_set = len(layout.slots) // max(len(seeds), 1)
        if per_set * len(seeds) != len(layout.slots):
            raise PackError(f"{len(layout.slots)} inputs do not split into {len(seeds)} sets")
        with open_pack(fds[0], layout, self.device) as pack:
            held = pack.values(self.device)
        for index, seed in enumerate(seeds):
            expected = self._inputs(seed)
            for position, (now, then) in enumerate(zip(held[index * per_set:(index + 1) * per_set], expected)):
                if isinstance(then, torch.Tensor) and (now is None or not _same(now, then)):
                    return {"intact": False, "where": f"timing buffer {index}, input {position}"}
        return {"intact": True, "where": ""}

    @handles(requests.Release)
    def op_release(self, request: requests.Release, fds: list[int]):
        self.baselines.pop(request.name, None)
        self.baseline_seeds.pop(request.name, None)
        self.compiled.pop(request.name, None)
        if request.name.startswith("compile"):
            # Each compiled baseline starts from scratch, not from the previous one's state.
            torch.compiler.reset()
        self._return_free_memory()
        return {}

    @handles(requests.Probe)
    def op_probe(self, request: requests.Probe, fds: list[int]):
        """A fixed device workload, best of a few: inflated when something else keeps the device busy."""
        from hercules.harness.roofline import _best_ms

        if self.device.type != "cuda":
            return {"ms": None}
        a = torch.randn(2048, 2048, device=self.device)
        return {"ms": _best_ms(lambda: a @ a, self.device)}

    @handles(requests.Roofline)
    def op_roofline(self, request: requests.Roofline, fds: list[int]):
        from hercules.harness.flops import count_flops

        values = self._inputs(request.seed)
        with torch.no_grad():
            flops, out = count_flops(self.model, values)
        outs = flatten_outputs(out)
        return {"flops": flops, "input_bytes": _timing.set_bytes(values), "output_bytes": _timing.set_bytes(outs)}

    @handles(requests.Ceilings)
    def op_ceilings(self, request: requests.Ceilings, fds: list[int]):
        from hercules.harness.roofline import measure_ceilings

        return {"ceilings": measure_ceilings(torch.device(request.device))}


def fill_from_pack(fd: int, layout: Any, device: torch.device, targets: list[tuple]) -> None:
    """Write a pack's values, set after set, into the tensors of ``targets`` in place: the buffers
    timing uses, so no multi-GB temporary is allocated and freed around a measurement."""
    layout = layout if isinstance(layout, PackLayout) else PackLayout.from_message(layout)
    with open_pack(fd, layout, device) as pack:
        pack.copy_into([dst for target in targets for dst in target])  # refuses places that do not fit
    synchronize(device)


def _run_reference(model: Any, model64: Any, values: list[Any]) -> tuple[list[Any], list[Any] | None]:
    """The problem-dtype outputs and, where ``model64`` is given, the float64 truth on ``values``."""
    with torch.no_grad(), StrictPrecision():
        outs = flatten_outputs(model(*values))
        truth = None
        if model64 is not None:
            upcast = [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]
            truth = flatten_outputs(model64(*upcast))
    return outs, truth


def _reference_figures(outs: list[Any], truth: list[Any] | None) -> dict[str, Any]:
    """Non-finite values of the problem-dtype outputs, and their worst relative error against
    ``truth`` (None without one): what ``oracle.skip_reason`` reads."""
    floats = [o for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point()]
    nonfinite = sum(int((~torch.isfinite(o)).sum()) for o in floats)
    comparable = truth is not None and len(truth) == len(outs) and all(
        isinstance(o, torch.Tensor) and isinstance(t, torch.Tensor) and o.shape == t.shape for o, t in zip(outs, truth))
    ref_err = max((relative_error(o, t) for o, t in zip(outs, truth)), default=0.0) if comparable else None
    return {"nonfinite": nonfinite, "has_truth": comparable, "ref_err": ref_err}


LIGHT_JUDGING_FACTOR = 10.0


def _rms(t: torch.Tensor) -> float | None:
    """A tensor's root-mean-square in float64; None when empty or not finite (no scale to go by)."""
    if t.numel() == 0:
        return None
    values = t if t.is_floating_point() or t.is_complex() else t.double()
    value = float(torch.linalg.vector_norm(values, dtype=torch.float64)) / t.numel() ** 0.5
    return value if math.isfinite(value) and value > 0 else None


def _loosened(tol: Tolerance) -> Tolerance:
    """The tolerance for calls judged only for having run on their own values."""
    return Tolerance(atol=tol.atol * LIGHT_JUDGING_FACTOR, rtol=tol.rtol * LIGHT_JUDGING_FACTOR,
                     rel_tol=max(tol.rel_tol * LIGHT_JUDGING_FACTOR, 0.05), downcast_ratio=tol.downcast_ratio,
                     downcast_floor=tol.downcast_floor)


class _Meta:
    """Shape and dtype of an output whose bytes were not copied (its layout already disqualifies it)."""

    def __init__(self, shape, dtype):
        self.shape = torch.Size(shape)
        self.dtype = getattr(torch, dtype)


class CandidateWorker(PackEnds):
    """Untrusted: imports, builds and runs one candidate. Everything it reports is checked by the
    parent or the reference worker, or is a tripwire for the careless."""

    def __init__(self):
        self.timing_sets: list[tuple] = []
        self.trial_sets: list[tuple] = []
        self.executed: set[int] | None = None  # the candidate file's executed lines, when traced
        self.outputs_reused = False  # two calls hand back the same buffers (found after timing)
        self.held_outputs: list[tuple[torch.Tensor, float]] = []  # the last trial's outputs and checksums
        # Calls after the trials returning an output that shares memory with their inputs: found
        # as each call ends (CPU passes) or from the last pass's outputs (``buffers``).
        self.later_aliases = False
        self.last_every_call: tuple[Any, list[Any]] = ((), [])

    # Requests that run the candidate's code and little else: whatever they raise is the candidate's.
    FOREIGN_OPS = frozenset({"import", "build"})

    def foreign_code(self) -> blame.ForeignCode:
        path = getattr(self, "path", None)
        return blame.ForeignCode(files=frozenset({str(path)} if path else ()),
                                 objects=(getattr(self, "model", None),))

    def _warm_up_runtime(self, compiler: bool = True) -> None:
        # Lazy initialisation inside torch (CUDA context, cuBLAS handles, extension loader) must
        # happen before the snapshot so that it is not mistaken for tampering.
        x = torch.randn(64, 64, device=self.device)
        (x @ x).sum().item()
        import torch.utils.cpp_extension as _cpp_extension  # noqa: F401
        if compiler:
            # Importing dynamo rebinds torch.manual_seed (wrapped to disable tracing), and its first
            # compilation wraps nn.Module.__init__ / __setstate__ (generation tagging). The profiler
            # (the GPU's stream check imports dynamo through it) and candidates calling torch.compile
            # would do both later; the snapshot knows these wrappers (integrity._COMPILER_WRAPPERS)
            # for what imports it unannounced. 1.1 s of the CPU's set-up, so asked for only there.
            import torch._dynamo as _dynamo  # noqa: F401
            import torch._dynamo.mutation_guard as _mutation_guard
            import torch.profiler as _profiler  # noqa: F401

            _mutation_guard.install_generation_tagging_init()
        try:
            import triton  # noqa: F401
            import triton.language  # noqa: F401
        except Exception:
            pass
        from hercules.harness import triton_compat

        triton_compat.apply()

    @handles(requests.Ping)
    def op_ping(self, request: requests.Ping, fds: list[int]):
        return {}

    @handles(requests.DatapathEcho)
    def op_datapath_echo(self, request: requests.DatapathEcho, fds: list[int]):
        """The reference's device-memory probe, read and handed back as a device pack of this
        process (no host fallback either way)."""
        from hercules.harness.device_pack import write_device_pack

        values = read_pack(fds[0], request.layout, self.device)
        fd, layout = write_device_pack(values, self.device)
        return {"layout": layout.to_message(), "types": ["torch.Tensor"] * len(values), "fds": 1, "_fds": [fd]}

    @handles(requests.Import)
    def op_import(self, request: requests.Import, fds: list[int]):
        """Import only: module-level load_inline / load calls compile into the build cache."""
        _force_verbose_extension_builds()
        start = _perf_counter()
        load_module(request.code, Path(request.path), "hercules_candidate")
        return {"seconds": _perf_counter() - start}

    @handles(requests.Prepare)
    def op_prepare(self, request: requests.Prepare, fds: list[int]):
        """Everything before the candidate's code: device, CUDA context, the lazy imports. Needs no
        problem data, so it runs while the reference worker sets the problem up."""
        self.device = use_device(request.device)
        self.dtype = getattr(torch, request.dtype)
        self._warm_up_runtime(compiler=bool(request.compiler) or self.device.type == "cuda")
        self.prepared = True
        return {}

    def _traced(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` recording the candidate file's executed lines (fallback branches are judged
        by whether they ran)."""
        if self.executed is None:
            return fn()
        sys.settrace(_FrameTracer(str(self.path), self.executed))
        try:
            return fn()
        finally:
            sys.settrace(None)

    @handles(requests.Build)
    def op_build(self, request: requests.Build, fds: list[int]):
        if not getattr(self, "prepared", False):
            self.op_prepare(requests.Prepare(device=request.device, dtype=request.dtype,
                                             compiler=request.compiler), fds)
        _force_verbose_extension_builds()
        self.path = Path(request.path)
        if request.trace_lines:
            self.executed = set()
        track_thread_origins(str(self.path))
        self.snapshot = Snapshot.take()
        # The context's own persisting-L2 limit before the candidate runs (the H200's default is
        # 11,796,480 bytes, not 0): only a candidate that raises it has set a carve-out.
        self.persisting_l2_before = _persisting_l2_bytes(self.device)
        start = _perf_counter()
        module = self._traced(lambda: load_module(request.code, self.path, "hercules_candidate"))
        self.model = self._traced(lambda: build_model(module, "ModelNew", list(request.init_inputs), request.init_seed,
                                                      self.device, self.dtype, perturb_seed=request.perturb_seed))
        synchronize(self.device)
        return {"seconds": _perf_counter() - start}

    def _poison(self, specs) -> None:
        """Fill the allocator's free blocks with NaN so an output the candidate never wrote shows."""
        blocks = []
        for spec in specs or ():
            dtype = getattr(torch, spec["dtype"])
            t = torch.empty(spec["shape"], dtype=dtype, device=self.device)
            t.fill_(float("nan") if dtype.is_floating_point else -1)
            blocks.append(t)
        del blocks

    def _lines(self) -> list[int]:
        return sorted(self.executed) if self.executed is not None else []

    @handles(requests.Run)
    def op_run(self, request: requests.Run, fds: list[int]):
        if request.first:  # the checks start (again): the timing buffers are this round's trials
            self.trial_sets = []
        values = read_pack(fds[0], request.layout, self.device)
        pristine = [v.clone() if isinstance(v, torch.Tensor) else v for v in values]
        self._poison(request.specs)
        swallowed: list[str] = []
        tracer = (_FrameTracer(str(self.path), self.executed)
                  if request.trace or self.executed is not None else None)
        with torch.no_grad():
            if tracer:
                sys.settrace(tracer)
            try:
                out = self.model(*values)
            finally:
                if tracer:
                    sys.settrace(None)
            synchronize(self.device)
        if tracer:
            swallowed = tracer.events
        outs = flatten_outputs(out)
        aliases = _aliases(outs, values)
        mutated = any(not _same(v, p) for v, p in zip(values, pristine) if isinstance(v, torch.Tensor))
        overwrote = _overwrites(outs, self.held_outputs)
        # Held until the next call, so that no honest allocator can hand their memory out again.
        self.held_outputs = [(o, _checksum(o)) for o in outs if type(o) is torch.Tensor and o.numel()]
        # Kept for timing only as many as timing rotates through: five 6.4 GB trial sets held
        # here beside the reference worker's took the device past its memory.
        if len(self.trial_sets) < _timing.sets_to_keep(_timing.set_bytes(pristine), self.device):
            self.trial_sets.append(tuple(pristine))
        del pristine
        return self._pack_reply(outs, {"aliases": aliases, "mutated": mutated, "swallowed": swallowed[:10],
                                  "executed_lines": self._lines(), "overwrote": overwrote})

    @handles(requests.Time)
    def op_time(self, request: requests.Time, fds: list[int]):
        # Timed again (``keep_sets``): the same buffers, as revalidation and the bursts left them.
        if not (request.keep_sets and getattr(self, "timing_sets", None)):
            self.timing_sets = _timing.rotation_sets(self.trial_sets, self.device)
        with torch.no_grad():
            result = _timing.time_callable(self.model, self.timing_sets, device=self.device,
                                           budget_s=request.budget_s, warmup_s=request.warmup_s,
                                           min_reps=request.min_reps, wall_check=False)
            self.outputs_reused, overwrote = self._outputs_reused()
        return {"timing": result.__dict__, "sets": len(self.timing_sets), "overwrote": overwrote}

    def _outputs_reused(self) -> tuple[bool, bool]:
        """Whether two calls, the first one's outputs still held, hand back the same buffers (a
        CUDA-graph replay's static outputs): bursts that return every call's outputs then copy
        each call's as it comes, and the candidate pays for those copies. Second: whether the
        second call wrote over the first one's outputs (values changed under the caller)."""
        first = flatten_outputs(self.model(*self.timing_sets[0]))
        synchronize(self.device)
        held_sums = [(o, _checksum(o)) for o in first if type(o) is torch.Tensor and o.numel()]
        held = {o.data_ptr() for o, _ in held_sums}
        second = flatten_outputs(self.model(*self.timing_sets[1 % len(self.timing_sets)]))
        synchronize(self.device)
        reused = any(isinstance(o, torch.Tensor) and o.numel() and o.data_ptr() in held for o in second)
        return reused, _overwrites(second, held_sums)

    @handles(requests.Buffers)
    def op_buffers(self, request: requests.Buffers, fds: list[int]):
        """The timing buffers as they are now, every set in order, for the reference to check
        against the values they were given; and whether any call since the trials returned an
        output sharing memory with its inputs (the trials' own check saw five calls)."""
        arg_sets, per_call_outputs = self.last_every_call
        aliases = self.later_aliases or any(_aliases(outs, arg_sets[i % len(arg_sets)])
                                            for i, outs in enumerate(per_call_outputs))
        self.later_aliases, self.last_every_call = False, ((), [])
        return self._pack_reply([v for target in self.timing_sets for v in target], {"aliases": aliases})

    @handles(requests.Refresh)
    def op_refresh(self, request: requests.Refresh, fds: list[int]):
        """Fresh values written into the very buffers used while timing: a result cached by address
        or shape now goes stale."""
        target = self.timing_sets[int(request.index) % len(self.timing_sets)]
        fill_from_pack(fds[0], request.layout, self.device, [target])
        return {}

    @handles(requests.Single)
    def op_single(self, request: requests.Single, fds: list[int]):
        """One call on a timing buffer after an L2 flush; outputs packed only after the device-wide
        synchronise inside single_call_ms, so work left on another stream is finished, not read
        half-done."""
        target = self.timing_sets[int(request.index) % len(self.timing_sets)]
        self._poison(request.specs)
        flush_l2 = _timing._Flusher(self.device, True)
        with torch.no_grad():
            outs, ms = _timing.single_call_ms(lambda: flatten_outputs(self.model(*target)), self.device, flush_l2)
        return self._pack_reply(outs, {"event_ms": ms})

    @handles(requests.Burst)
    def op_burst(self, request: requests.Burst, fds: list[int]):
        calls = int(request.calls)
        with torch.no_grad():
            if not request.every_call:
                outs, enqueue = _timing.burst_outputs(self.model, self.timing_sets, self.device, calls)
                return self._pack_reply(outs, {"enqueue_ms": enqueue, "executed_lines": self._lines()},
                                        request.into, fds)
            return self._every_call(self.timing_sets, calls, request.into, fds)

    @handles(requests.FreshBurst)
    def op_fresh_burst(self, request: requests.FreshBurst, fds: list[int]):
        """Never-seen values into the first timing buffers, then one call on each back to back, and
        every call's outputs back. The values arrive with this request, which the parent times as
        a whole: no result can be prepared before its clock starts, and none skipped."""
        layout = PackLayout.from_message(request.layout)
        per_set = max(int(request.per_set), 1)
        calls = len(layout.slots) // per_set
        # The first sets go into the timing buffers (a cache keyed by address goes stale there, and
        # the pass on values just seen runs over them next); more sets than buffers, for a pass
        # long enough to outlast the round trip's jitter, are used where they arrive.
        in_buffers = min(calls, len(self.timing_sets))
        with open_pack(fds[0], layout, self.device) as pack:
            places = [dst for target in self.timing_sets[:in_buffers] for dst in target]
            pack.copy_into(places + [None] * (len(layout.slots) - len(places)))
            rest = pack.values(self.device, start=len(places))
        synchronize(self.device)
        arg_sets = list(self.timing_sets[:in_buffers]) + [tuple(rest[i:i + per_set]) for i in range(0, len(rest), per_set)]
        with torch.no_grad():
            return self._every_call(arg_sets, calls, request.into, fds)

    def _every_call(self, arg_sets: list[tuple], calls: int, into: dict[str, Any] | None,
                    fds: list[int]) -> dict[str, Any]:
        """A burst whose every call's outputs come back. On the CPU, with a destination in the
        request, each call's outputs are written there as the call ends and freed: kept to the end
        instead, the calls wrote 62 MB of fresh memory where the long burst reuses one 2 MB
        output that stays in cache, and an honest 0.077 ms elementwise call read 0.25 ms per call
        (2-core VM). On a GPU they are kept and packed after the device-wide synchronise."""
        if into is not None and self.device.type == "cpu":
            def watch(index: int, outs: list[Any]) -> None:
                if not self.later_aliases:  # a few us a call, beside calls of 0.05 ms and more on the CPU
                    self.later_aliases = _aliases(outs, arg_sets[index % len(arg_sets)])

            return self._written_as_called(self.model, arg_sets, calls, into, fds, watch, copy=self.outputs_reused,
                                           fields={"executed_lines": self._lines})
        # The last burst's outputs go before this one's calls start, as a baseline's do: held
        # through it, they would make this burst's outputs take fresh memory where the baseline's
        # reuse what its last burst freed (both sides of a side-by-side round must allocate alike).
        # Only the last burst's aliasing is read (``op_buffers``), as before: reading theirs here
        # would put that work inside this burst's clock, on the candidate's side only.
        self.last_every_call = ((), [])
        with _timing.DeviceClock(self.device, calls) as clock:  # its own report: diagnosis only
            per_call_outputs, enqueue = _timing.burst_outputs(self.model, arg_sets, self.device, calls,
                                                              every_call=True, own_copies=self.outputs_reused)
        # Checked after the timed request, in ``buffers``: on a GPU a pass's calls take microseconds.
        self.last_every_call = (arg_sets, per_call_outputs)
        return self._pack_reply([o for outs in per_call_outputs for o in outs],
                                {"enqueue_ms": enqueue, "executed_lines": self._lines(), "device_ms": clock.ms()},
                                into, fds)

    @handles(requests.Streams)
    def op_streams(self, request: requests.Streams, fds: list[int]):
        """CUDA streams the candidate's kernels ran on, from the profiler's kernel records.

        A marker kernel launched on the current stream first names that stream; any kernel of the
        forward on another stream is work that events on the current stream cannot see.
        """
        import json
        import tempfile

        from torch.profiler import ProfilerActivity, profile

        args = (self.timing_sets or self.trial_sets)[0]
        marker = torch.empty(1, device=self.device)
        synchronize(self.device)
        with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
            marker.fill_(1.0)
            self.model(*args)
            synchronize(self.device)
        handle, name = tempfile.mkstemp(suffix=".json")
        os.close(handle)
        try:
            prof.export_chrome_trace(name)
            events = json.loads(Path(name).read_text()).get("traceEvents", [])
        finally:
            os.unlink(name)
        kernels = sorted((e for e in events if e.get("cat") == "kernel" and "stream" in e.get("args", {})),
                         key=lambda e: e.get("ts", 0))
        if not kernels:
            return {"current": None, "other": [], "kernels": 0, "names": []}
        current = kernels[0]["args"]["stream"]
        other = sorted({str(k["args"]["stream"]) for k in kernels[1:] if k["args"]["stream"] != current})
        names = sorted({k.get("name", "")[:80] for k in kernels[1:] if k["args"]["stream"] != current})
        return {"current": str(current), "other": other, "kernels": len(kernels) - 1, "names": names[:5]}

    @handles(requests.Integrity)
    def op_integrity(self, request: requests.Integrity, fds: list[int]):
        neutral = getattr(self.snapshot, "changed_neutral_settings", None)
        return {
            "patched": self.snapshot.changed_attributes(),
            "settings": self.snapshot.changed_settings(),
            "neutral_settings": neutral() if neutral else [],
            "threads": self.snapshot.new_threads(),
            "persisting_l2_bytes": max(0, _persisting_l2_bytes(self.device) - getattr(self, "persisting_l2_before", 0)),
        }


def _persisting_l2_bytes(device: torch.device) -> int:
    """The persisting-L2 carve-out set in this context: data kept there survives the L2 flush, so
    every repetition finds it warm, which no honest kernel does."""
    if device.type != "cuda":
        return 0
    try:
        import ctypes

        runtime = ctypes.CDLL(_loaded_cudart())
        value = ctypes.c_size_t(0)
        if runtime.cudaDeviceGetLimit(ctypes.byref(value), CUDA_LIMIT_PERSISTING_L2) == 0:
            return int(value.value)
    except (OSError, AttributeError, FileNotFoundError):
        pass
    return 0


CUDA_LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize


def _loaded_cudart() -> str:
    """The CUDA runtime this process already uses (torch's), not whichever one ld would find."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "libcudart.so" in path:
                return path
    return "libcudart.so"
class _FrameTracer:
    """Records, in the candidate's own frames only, exceptions raised (hidden ones are flagged) and
    the lines executed (a fallback branch is judged by whether it ran)."""

    def __init__(self, filename: str, lines: set[int] | None = None):
        self.filename = filename
        self.events: list[str] = []
        self.lines = lines

    def __call__(self, frame, event, arg):
        if frame.f_code.co_filename != self.filename:
            return None
        if self.lines is not None:
            self.lines.add(frame.f_lineno)
        return self._local

    def _local(self, frame, event, arg):
        if event == "exception":
            exc_type, exc, _ = arg
            self.events.append(f"line {frame.f_lineno}: {exc_type.__name__}: {exc}"[:300])
        elif event == "line" and self.lines is not None:
            self.lines.add(frame.f_lineno)
        return self._local


def _type_name(value: Any) -> str:
    cls = type(value)
    if cls is torch.Tensor:
        return "torch.Tensor"
    prefix = "subclass:" if isinstance(value, torch.Tensor) else ""
    return f"{prefix}{cls.__module__}.{cls.__qualname__}"


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device:
        return False
    try:
        sa, sb = a.untyped_storage(), b.untyped_storage()
    except Exception:
        return False
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes() and sa.nbytes() > 0 and sb.nbytes() > 0


def _aliases(outs: list[Any], args: tuple) -> bool:
    """Whether an output shares memory with an input of the same call."""
    return any(_shares_storage(o, a) for o in outs if type(o) is torch.Tensor
               for a in args if isinstance(a, torch.Tensor))


def _checksum(t: torch.Tensor) -> float:
    """A float64 sum of a tensor's values (no copy of it made): changes when they are written over."""
    with torch.no_grad():
        return 0.0 if t.is_complex() else float(torch.sum(t.detach(), dtype=torch.float64))


def _overwrites(outs: list[Any], held: list[tuple[torch.Tensor, float]]) -> bool:
    """Whether a call's outputs were written into the memory of earlier outputs still held by the
    caller, changing their values: the kept-buffer pattern (one static output returned by every
    call) that PyTorch's own CUDA-graph trees refuse to hand out, since a caller holding the first
    result sees it change. The same buffer returned with the same values (a constant) does not
    count; fresh buffers, pools that skip buffers still referenced, and graphs that return copies
    never share memory with an output still held."""
    for out in outs:
        if type(out) is not torch.Tensor or not out.numel():
            continue
        for earlier, checksum in held:
            if _shares_storage(out, earlier):
                now = _checksum(earlier)
                if not (now == checksum or (math.isnan(now) and math.isnan(checksum))):
                    return True
    return False


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(torch.equal(a, b)) or bool(torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)))


def _force_verbose_extension_builds() -> None:
    """Build logs must be kept, so make load_inline / load print the compiler's output."""
    import torch.utils.cpp_extension as ext

    for name in ("load_inline", "load"):
        original = getattr(ext, name)

        def verbose(*args, _original=original, **kwargs):
            kwargs["verbose"] = True
            return _original(*args, **kwargs)

        setattr(ext, name, verbose)


ROLES: dict[str, Callable[[], Any]] = {"reference": ReferenceWorker, "candidate": CandidateWorker}


def handler_for(handler: Any, kind: type[requests.Request]) -> Callable[[Any, list[int]], dict[str, Any]]:
    """The method of ``handler`` registered for requests of type ``kind`` (``@handles``)."""
    for cls in type(handler).__mro__:
        for attribute in vars(cls).values():
            if getattr(attribute, "handles", None) is kind:
                return attribute.__get__(handler)
    raise requests.RequestError(f"the {type(handler).__name__} does not answer '{kind.op}'")


# A caching allocator keeps its process' peak. With several evaluations' trials sharing one GPU,
# problems with multi-GB tensors (KernelBench level 1: 6-17 GB an input) ran the H200 out of
# memory while most of it sat cached in idle workers; what is cached beyond this goes back.
RELEASE_CACHED_ABOVE_BYTES = 1 << 30
# Requests of a measurement (the device lock is held, nothing else runs on the device) keep the
# cache: a burst that starts by asking the driver for its multi-GB outputs again is slower than
# the calls it times, and a fresh single call right after a refresh that handed 6.4 GB back was
# 45 ms against 8 ms for the same call once the memory was cached again (KernelBench 26_GELU on the
# H200, flagged as a content cache).
MEASUREMENT_OPS = frozenset({"time", "refresh", "single", "burst", "fresh_burst", "streams", "baseline_time",
                             "reserve"})


# After these requests (untimed, each leaving a large heap behind: the problem set up, the
# candidate's in-process timing, just before the parent's measurements, a compiled baseline) the
# surviving objects are moved out of the cyclic collector's reach: a full collection in a process
# that has imported dynamo, Triton and the profiler walks 300,000 objects (155-166 ms on the CPU
# machine), and it lands in whichever timed burst it interrupts (the candidate's and a baseline's
# alike). The collector stays on for what comes later. Not after the build: the candidate's `time`
# request follows before anything the parent times, and each collection costs the CPU test suite.
SETTLE_OPS = frozenset({"setup", "time", "baseline_prepare"})


def _settle_heap() -> None:
    gc.collect()
    gc.freeze()


def _release_cached_memory() -> None:
    pack = sys.modules.get("hercules.harness.device_pack")
    if pack is not None:  # a reserved pack no measurement used: its device memory goes back too
        with contextlib.suppress(Exception):
            pack.drop_spare()
    try:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            if torch.cuda.memory_reserved() - torch.cuda.memory_allocated() > RELEASE_CACHED_ABOVE_BYTES:
                torch.cuda.empty_cache()
    except Exception:  # best effort: a broken CUDA context is reported by the next request
        pass


def serve(role: str, conn: Connection) -> None:
    handler = ROLES[role]()
    while True:
        try:
            msg = decode(conn.recv_bytes())
        except EOFError:
            return
        op = msg.get("op")
        if op == "exit":
            return
        start = _perf_counter()
        received: list[int] = []  # descriptors that came with the request
        fds: list[int] = []  # descriptors the reply hands over
        try:
            if msg.get("fds"):
                received = receive_fds(conn.fileno(), int(msg["fds"]))
            request = requests.parse(msg)
            reply = handler_for(handler, type(request))(request, received)
            fds = reply.pop("_fds", [])
            reply["ok"] = True
        except BaseException as exc:  # the verdict decides what an exception means
            if isinstance(exc, KeyboardInterrupt):
                raise
            kind = classify_exception(exc)
            if kind == "error" and blame.owner(exc, handler.foreign_code(), op in handler.FOREIGN_OPS) == blame.HARNESS:
                kind = "harness"  # Hercules' own code raised: never the candidate's (or problem's) verdict
            reply = {"ok": False, "kind": kind,
                     "error": (f"{type(exc).__name__}: {exc}" + _limit_hit(exc))[:2000],
                     "traceback": traceback.format_exc()[-4000:]}
            traceback.print_exc()
        finally:
            for fd in received:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if op not in MEASUREMENT_OPS:
            _release_cached_memory()
        if op in SETTLE_OPS and reply.get("ok"):
            _settle_heap()
        reply["worker_seconds"] = _perf_counter() - start
        conn.send_bytes(encode(reply))
        if fds:
            send_fds(conn.fileno(), fds)
            for fd in fds:
                os.close(fd)


def _limit_hit(exc: BaseException) -> str:
    """Which of this process's limits an error ran into, with its value (empty: none known)."""
    import errno
    import resource

    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        bound = "unlimited" if soft == resource.RLIM_INFINITY else f"{soft / 2**30:.1f} GiB"
        return f" (the sandbox's file-size limit, RLIMIT_FSIZE, is {bound})"
    if isinstance(exc, OSError) and exc.errno == errno.EMFILE:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return f" (the sandbox's open-file limit, RLIMIT_NOFILE, is {soft})"
    return ""


def _die_with_parent() -> None:
    """End this worker when the evaluating process dies, however it dies (SIGKILL included): a
    worker must never outlive its evaluation. The candidate's sandbox does the same for every
    process inside it; this covers the trusted reference worker."""
    try:
        import ctypes
        import signal

        parent = os.getppid()
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the line above took effect
            os._exit(0)
    except (OSError, AttributeError):
        pass


def main() -> None:
    role, fd = sys.argv[1], int(sys.argv[2])
    _die_with_parent()
    conn = Connection(fd)
    try:
        serve(role, conn)
    finally:
        sys.stdout.flush()
        os._exit(0)  # skip interpreter teardown: a candidate's atexit hooks must not run after us


if __name__ == "__main__":
    main()

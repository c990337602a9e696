"""What a problem costs, from shapes alone: run on the meta device (no memory, no arithmetic).

Used to rank problems by work (``benchmarks/kernelbench.py --smallest``) and, in the reference
worker, to tell an evaluation whose data alone fills a large share of the device to run with no
other evaluation beside it. The problem is trusted code, so it is executed where this is called.
"""

from __future__ import annotations

import contextlib
import functools
import time
import warnings
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

ERROR_CHARS = 200
FORWARD_LIMIT_S = 1.0


@dataclass(frozen=True)
class Footprint:
    """Bytes of inputs, weights (parameters and buffers) and outputs of one forward, and the FLOPs
    torch.utils.flop_counter counts (matmuls, convolutions, attention)."""

    name: str
    input_bytes: int | None
    weight_bytes: int | None
    output_bytes: int | None = None  # None: forward not run (yet), or it failed on meta tensors
    flops: int | None = None
    error: str | None = None
    float64_bytes: int | None = None  # float64 copies of the floating inputs, weights and outputs

    @property
    def known_bytes(self) -> int | None:
        """Inputs + weights: a lower bound of ``work``, known without running forward."""
        if self.input_bytes is None or self.weight_bytes is None:
            return None
        return self.input_bytes + self.weight_bytes

    @property
    def work(self) -> int | None:
        if self.known_bytes is None or self.output_bytes is None or self.flops is None:
            return None
        return self.flops + self.known_bytes + self.output_bytes


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def float64_bytes(*values: Any) -> int:
    """Bytes of float64 copies of the floating tensors in ``values`` (the float64 truth's run)."""
    return sum(t.numel() * 8 for value in values for t in _tensors(value) if t.is_floating_point())


def tensor_bytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in _tensors(value))


class _Deadline(TorchDispatchMode):
    """Stops a meta forward that runs past its time: nn.LSTM and nn.GRU decompose step by step on
    meta tensors and take 7-18 s each, and a problem issuing that many ops is no cheap CPU run."""

    def __init__(self, seconds: float):
        super().__init__()
        self.end = time.perf_counter() + seconds

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if time.perf_counter() > self.end:
            raise TimeoutError("meta forward past its time limit")
        return func(*args, **(kwargs or {}))


@functools.cache
def _warm_flop_counter() -> None:
    """The first counted forward of a process loads the decomposition tables (seconds, more on a
    busy host): done once before any deadline runs, so the deadline measures only the problem."""
    with torch.no_grad(), torch.device("meta"), FlopCounterMode(display=False):
        torch.ones(2, 2) @ torch.ones(2, 2)
        torch.nn.functional.conv2d(torch.ones(1, 1, 3, 3), torch.ones(1, 1, 2, 2))


@functools.cache
def _warm_meta() -> None:
    """The first meta forward of a process loads the meta kernels' registrations: 2.9 s for
    KernelBench's 8_ResNetBasicBlock on the 2-core machine, past its 2 s deadline (its outputs
    then unknown, and cached so), against 0.04 s for the same forward after it. Done once before
    any deadline runs."""
    with torch.no_grad(), torch.device("meta"):
        x = torch.ones(1, 2, 4, 4)
        torch.nn.functional.conv2d(x, torch.ones(2, 2, 3, 3))
        torch.nn.functional.batch_norm(x, torch.zeros(2), torch.ones(2))
        torch.nn.functional.linear(torch.ones(2, 2), torch.ones(2, 2))


def footprint(code: str, name: str, forward: bool = False, limit_s: float = FORWARD_LIMIT_S,
              count_flops: bool = True) -> Footprint:
    """The footprint of the problem ``code`` (a KernelBench-format file named ``name``); with
    FORWARD, also its outputs and (with COUNT_FLOPS) FLOPs, from a meta forward stopped after
    LIMIT_S."""
    namespace: dict[str, Any] = {"__name__": f"hercules_footprint_{abs(hash(name))}"}
    inputs = weights = None
    try:
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            exec(compile(code, name, "exec"), namespace)
            args = namespace["get_inputs"]()
            inputs = tensor_bytes(args)
            model = namespace["Model"](*namespace["get_init_inputs"]())
            params = [*model.parameters(), *model.buffers()] if isinstance(model, torch.nn.Module) else []
            weights = tensor_bytes(params)
            if not forward:
                return Footprint(name, inputs, weights)
            _warm_meta()
            counter = None
            if count_flops:
                _warm_flop_counter()
                counter = FlopCounterMode(display=False)
            with torch.no_grad(), counter if counter is not None else contextlib.nullcontext(), _Deadline(limit_s):
                outputs = model(*args)
            return Footprint(name, inputs, weights, tensor_bytes(outputs),
                             int(counter.get_total_flops()) if counter is not None else None,
                             float64_bytes=float64_bytes(args, params, outputs))
    except Exception as exc:  # noqa: BLE001 - any failure only means "cost unknown"
        return Footprint(name, inputs, weights, error=f"{type(exc).__name__}: {exc}"[:ERROR_CHARS])


def sizes(code: str, name: str, limit_s: float = FORWARD_LIMIT_S) -> dict[str, Any]:
    """What ``hercules list`` shows of a problem before anything runs for real: bytes of its inputs,
    parameters (and buffers) and outputs, and its FLOPs, from one meta forward (None where unknown,
    with the reason in ``error``)."""
    found = footprint(code, name, forward=True, limit_s=limit_s)
    return {"input_bytes": found.input_bytes, "param_bytes": found.weight_bytes, "output_bytes": found.output_bytes,
            "flops": found.flops, "error": found.error}


def available_bytes(device: str) -> tuple[int, str] | None:
    """Memory an evaluation on ``device`` can have at most, and what it is: the GPU's total memory,
    or the host's available memory (MemAvailable) for the CPU. None when it cannot be read."""
    if device.startswith("cuda") and torch.cuda.is_available():
        index = int(device.split(":")[1]) if ":" in device else 0
        return torch.cuda.mem_get_info(index)[1], f"{torch.cuda.get_device_name(index)} memory"
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "host memory available"
    except OSError:
        return None
    return None


# The meta forward that gives a problem's outputs costs seconds in a fresh process (its kernels'
# registrations: 2.9 s on the 2-core machine, once), so it runs only for a problem whose inputs and
# weights already take this share of the memory there: below it the outputs would have to be 60x
# the inputs for an evaluation's copies not to fit.
FORWARD_SHARE = 1 / 64


@dataclass(frozen=True)
class MemoryCheck:
    """Before an evaluation starts: ``refusal`` when the reference's own forward cannot fit the
    memory there, ``warning`` when only the whole evaluation cannot (it will most likely run out of
    memory); each with the numbers, None when not the case or the sizes are unknown."""

    refusal: str | None = None
    warning: str | None = None


def evaluation_bytes(found: Footprint) -> int | None:
    """What an evaluation holds at once at the least, where the forward's sizes are known: the
    reference's inputs, weights and outputs with their float64 copies (its truth's run), and the
    candidate's own inputs and outputs beside them (its weights are its own business). Caches,
    activations and the allocators' slack come on top: on the H100 KernelBench 19_ReLU (6.4 GB in,
    6.4 GB out; 51 GB by this count) asked for 12 GiB more with 67 GB held by the two workers."""
    if found.known_bytes is None or found.output_bytes is None:
        return None
    reference = found.known_bytes + found.output_bytes + (found.float64_bytes or 0)
    return reference + found.input_bytes + found.output_bytes


def check_memory(code: str, name: str, device: str) -> MemoryCheck:
    """Whether the problem can be evaluated on ``device`` (``MemoryCheck``), before anything runs."""
    have = available_bytes(device)
    found = footprint(code, name)
    if have is None or found.known_bytes is None:
        return MemoryCheck()
    limit, what = have
    if found.known_bytes >= limit * FORWARD_SHARE:
        found = footprint(code, name, forward=True, count_flops=False)
    if found.known_bytes is None:  # the problem's code ran a second time, and failed this time
        return MemoryCheck()
    certain = found.known_bytes + (found.output_bytes or 0)
    outputs = f", outputs ({found.output_bytes / 1e9:.1f} GB)" if found.output_bytes is not None else ""
    if certain > limit:
        return MemoryCheck(refusal=f"{name}: needs at least {certain / 1e9:.1f} GB for its inputs "
                                   f"({found.input_bytes / 1e9:.1f} GB), parameters ({found.weight_bytes / 1e9:.1f} GB)"
                                   f"{outputs} alone; {what}: {limit / 1e9:.1f} GB")
    need = evaluation_bytes(found)
    if need is None or need <= limit:
        return MemoryCheck()
    return MemoryCheck(warning=f"{name}: an evaluation holds at least {need / 1e9:.1f} GB at once (inputs "
                               f"{found.input_bytes / 1e9:.1f} GB, outputs {found.output_bytes / 1e9:.1f} GB, "
                               f"parameters {found.weight_bytes / 1e9:.1f} GB, their float64 copies for the "
                               f"truth {(found.float64_bytes or 0) / 1e9:.1f} GB, and the candidate's own "
                               f"inputs and outputs); {what}: {limit / 1e9:.1f} GB: it will most likely run "
                               "out of memory")

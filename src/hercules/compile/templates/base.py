"""Template and candidate records shared by every kernel template.

A *template* is a kernel family with a bounded parameter space; ``materialise(params, region)``
turns one point of that space into a *candidate*: a callable with the region's call convention
(see ``compile/reference.py``). Templates also *declare* what a parameter point needs
(``requirements``) so ``compile/constraints.py`` can reject it with a reason before anything is
built.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch

from ..regions import Region


def params_key(params: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(params.items()))


@dataclass(frozen=True)
class CandidateSpec:
    template: str
    lang: str  # "torch" | "triton" | "cuda"
    kind: str  # the region kind it implements
    params: tuple[tuple[str, Any], ...] = ()
    fuses: tuple[str, ...] = ()  # other region kinds this candidate also performs

    @property
    def id(self) -> str:
        if not self.params:
            return self.template
        inner = ",".join(f"{k}={v}" for k, v in self.params)
        return f"{self.template}[{inner}]"

    @property
    def param_dict(self) -> dict[str, Any]:
        return dict(self.params)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "template": self.template, "lang": self.lang, "kind": self.kind,
                "params": dict(self.params), "fuses": list(self.fuses)}


@dataclass
class Candidate:
    spec: CandidateSpec
    fn: Callable
    source: str | None = None  # rendered kernel source, for the record
    build_seconds: float = 0.0


@dataclass(frozen=True)
class Requirements:
    """What one parameter point needs; checked by constraints.check before building."""

    dtypes: tuple[str, ...] = ("float32", "float16", "bfloat16")
    backend: str = "any"  # "any" | "cuda" (CUDA C++) | "triton" (CUDA GPU, or the CPU interpreter in tests)
    min_sm: tuple[int, int] | None = None
    threads_per_block: int | None = None
    smem_bytes: int = 0  # static + dynamic shared memory per block
    regs_per_thread: int | None = None  # estimate
    acc_dtype: str = "float32"  # accumulation dtype of reductions
    fast_math: bool = False  # approximate intrinsics (__expf and friends)
    uses_tf32: bool = False  # tensor-core TF32 products on fp32 data
    # (what, value, divisor): value % divisor == 0
    divisible: tuple[tuple[str, int, int], ...] = ()
    power_of_two: tuple[tuple[str, int], ...] = ()
    # (what, value, bound)
    at_most: tuple[tuple[str, int, int], ...] = ()
    at_least: tuple[tuple[str, int, int], ...] = ()
    # region input names that must be fully contiguous / unit stride in the last dimension
    contiguous: tuple[str, ...] = ()
    last_dim_contiguous: tuple[str, ...] = ()
    max_batch: int | None = None
    same_dtype_inputs: tuple[str, ...] = ()  # these region inputs must share the region dtype


class Template:
    name: str = ""
    lang: str = "torch"
    kinds: tuple[str, ...] = ()

    def applies(self, region: Region) -> bool:
        return region.kind in self.kinds

    def space(self, region: Region) -> list[dict[str, Any]]:
        return [{}]

    def fuses(self, params: dict[str, Any], region: Region) -> tuple[str, ...]:
        return ()

    def requirements(self, params: dict[str, Any], region: Region) -> Requirements:
        return Requirements()

    def spec(self, params: dict[str, Any], region: Region) -> CandidateSpec:
        return CandidateSpec(self.name, self.lang, region.kind, params_key(params), self.fuses(params, region))

    def specs(self, region: Region) -> list[CandidateSpec]:
        return [self.spec(p, region) for p in self.space(region)] if self.applies(region) else []

    def materialise(self, params: dict[str, Any], region: Region) -> Candidate:
        raise NotImplementedError

    def materialise_many(self, params_list: list[dict[str, Any]], region: Region) -> list[Candidate | Exception]:
        """Build several points; a failed build is returned as its exception, not raised."""
        out: list[Candidate | Exception] = []
        for p in params_list:
            try:
                out.append(self.materialise(p, region))
            except Exception as e:  # a build failure is data
                out.append(e)
        return out


def grid(**axes: Iterable[Any]) -> list[dict[str, Any]]:
    keys = list(axes)
    return [dict(zip(keys, vals)) for vals in itertools.product(*(list(axes[k]) for k in keys))]


def next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def triton_interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


@dataclass
class TorchVariant(Template):
    """A plain PyTorch implementation (the fallback, or a faster PyTorch formulation)."""

    name: str = "torch"
    kinds: tuple[str, ...] = ()
    fn: Callable | None = None
    fallback: bool = True
    description: str = ""
    fused: tuple[str, ...] = field(default=())
    lang: str = "torch"

    def fuses(self, params, region):
        return self.fused

    def materialise(self, params, region):
        return Candidate(self.spec(params, region), self.fn)


class Tickets:
    """One-launch reductions' counters (the last program / warp to take a ticket finishes the work):
    per-device int32 counters, zero between calls (the program that takes the last ticket resets
    its own); allocated on first use, which must be outside CUDA-graph capture (a buffer allocated
    during capture would belong to the graph's private pool)."""

    def __init__(self, n: int):
        self.n = n
        self._by_device: dict[torch.device, torch.Tensor] = {}

    def get(self, device: torch.device) -> torch.Tensor:
        t = self._by_device.get(device)
        if t is None:
            if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
                raise RuntimeError("ticket counters are allocated on the first call, which must not be captured")
            t = self._by_device[device] = torch.zeros(self.n, dtype=torch.int32, device=device)
        return t

"""Fidelity gate: teacher-forced next-token distributions against a float32 copy of the HF model.

    from hercules.compile.fidelity import measure_fidelity
    f = measure_fidelity(model, dec, prompt_ids, new_tokens=32)   # model: the HF model dec was compiled from
    f.passed, f.kl_hercules, f.kl_hf_same_dtype

What is compared, on the same weights and the same tokens:

* reference p: a float32 copy of the HF model (the model's own weights upcast, so exactly the
  same values), eager, TF32 off;
* tokens: the prompt plus the reference's own greedy continuation of ``new_tokens`` tokens;
* the distributions at the prompt's last position and at every generated position (``new_tokens
  + 1`` per sequence: the first prediction comes from the prompt pass, the last one is the
  prediction after the last generated token);
* q_hercules: the compiled decoder teacher-forced over those tokens (its prompt pass, then one
  decode step per token), in the model's dtype;
* q_hf: HF's own model in that same dtype, one forward pass over the same tokens.

Both are scored by the mean over positions (and sequences) of KL(p || q). log_softmax and the KL
sum run in float64: the fp32-vs-fp32 KLs are ~1e-12 nats, while float32 log-probabilities of a
150k vocabulary carry absolute errors of ~1e-6 (|log p| up to ~20 at 2**-24 relative), so a
float32 KL would be rounding noise.

Gate: ``passed = kl_hercules <= kl_hf_same_dtype + tolerance`` with ``tolerance =
FLOAT_NOISE_KL`` (1e-9 nats), recorded in the result beside ``passed_strict`` (the comparison
with no tolerance at all). Why a tolerance: in float32 HF's model *is* the reference (KL exactly
0), and any other summation order -- Hercules' kernels -- gives a KL of ~1e-12 that a strict
gate would call a failure. A logit perturbation d gives KL ~= Var_p(d) / 2, so 1e-9 nats is an
rms logit error of ~4.5e-5: a thousand times the KL of float32 reordering (1e-12 on the tiny
models) and five orders of magnitude below every bf16 KL measured (2e-4 to 3e-3: tiny models on
the CPU, Llama-3.2-1B and Qwen3-4B on the H200), so it never decides a bf16 gate.

What the gate can and cannot tell: a plan whose kernels round like HF's lands within a few per
cent of kl_hf either side (CPU, tiny models, six prompts: 0.98-1.04x), so for it the strict gate
is close to a coin flip; a plan that rounds less (fp32 intermediates inside fused kernels) passes
with a margin, and one that rounds more fails (a projection whose input keeps 5 significant bits,
inside the per-region check's bf16 tolerance: 1.7-2.5x).
"""

from __future__ import annotations

import contextlib
import copy
import gc
import inspect
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from .regions import dtype_name

FLOAT_NOISE_KL = 1e-9  # nats per position; see the module docstring for why and how large
LOG_SOFTMAX_DTYPE = torch.float64


@dataclass
class Fidelity:
    """One fidelity measurement (both KLs against the float32 reference, and the gate)."""

    dtype: str  # the model's (and both candidates') dtype
    batch: int
    prompt_len: int
    positions: int  # distributions compared per sequence: the prompt's last position + each generated one
    kl_hercules: float  # mean KL(p_fp32 || q_hercules), nats per position
    kl_hf_same_dtype: float  # mean KL(p_fp32 || q_hf) with HF's model in ``dtype``
    kl_difference: float  # kl_hercules - kl_hf_same_dtype
    kl_ratio: float | None  # kl_hercules / kl_hf_same_dtype (None when the latter is 0)
    max_kl_hercules: float  # the largest KL at one position of one sequence
    max_kl_hf_same_dtype: float
    argmax_agreement_hercules: float  # fraction of positions whose argmax equals the reference's
    argmax_agreement_hf_same_dtype: float
    tolerance: float  # nats, added to kl_hf_same_dtype by the gate
    passed: bool  # kl_hercules <= kl_hf_same_dtype + tolerance
    passed_strict: bool  # kl_hercules <= kl_hf_same_dtype
    rule: str = "kl_hercules <= kl_hf_same_dtype + tolerance (the float-noise floor)"
    reference: str = "float32 copy of the HF model (same weights upcast), eager, TF32 off"
    tokens: str = "prompt + the float32 reference's greedy continuation"
    log_softmax_dtype: str = "float64"
    hf_attention: str = ""  # HF's attention implementation for q_hf (its config's, sdpa by default)
    seconds: float = 0.0  # the whole measurement, the float32 copy included
    kl_hercules_per_position: list[float] = field(default_factory=list)  # mean over the batch
    kl_hf_per_position: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@contextlib.contextmanager
def _full_fp32_matmul():
    """A float32 reference must not run its GEMMs in TF32."""
    saved = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved)


def float32_reference(model):
    """A float32 copy of ``model`` on its device (for a 4B model 16 GB; free it after use)."""
    ref = copy.deepcopy(model)
    return ref.to(torch.float32).eval()


def release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


@torch.no_grad()
def hf_decode_logits(model, prompt: torch.Tensor, steps: int, forced: torch.Tensor | None = None):
    """HF's own decode loop, teacher-forced: the prompt pass, then one token per forward call over a
    DynamicCache, as ``generate`` runs it (the prompt pass takes the lm_head of the last position
    only, like generate's ``logits_to_keep=1``). Returns (fed tokens [B, steps - 1], fp32 logits
    [steps, B, V]); without ``forced`` the fed tokens are the greedy ones."""
    B = prompt.shape[0]
    logits = []
    fed = []
    # transformers 5.x renamed past_key_values to cache (the old name warns from 5.2x on)
    cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    out = model(prompt, use_cache=True, logits_to_keep=1)
    for i in range(steps):
        last = out.logits[:, -1]
        logits.append(last.float())
        if i == steps - 1:
            break
        tok = forced[:, i] if forced is not None else last.argmax(-1)
        fed.append(tok)
        cache = out.cache if cache_kw == "cache" else out.past_key_values
        out = model(tok.view(B, 1), use_cache=True, **{cache_kw: cache})
    tokens = torch.stack(fed, 1) if fed else prompt.new_empty(B, 0)
    return tokens, torch.stack(logits)


def kl_per_position(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """KL(p || q) [n, B] in float64 for logits [n, B, V], one position at a time (a [B, V] float64
    temporary instead of [n, B, V])."""
    out = torch.empty(p_logits.shape[:2], dtype=LOG_SOFTMAX_DTYPE, device=p_logits.device)
    for i in range(p_logits.shape[0]):
        lp = torch.log_softmax(p_logits[i].to(LOG_SOFTMAX_DTYPE), dim=-1)
        lq = torch.log_softmax(q_logits[i].to(device=p_logits.device, dtype=LOG_SOFTMAX_DTYPE), dim=-1)
        out[i] = (lp.exp() * (lp - lq)).sum(-1)
    return out


def gate(kl_hercules: float, kl_hf: float, tolerance: float = FLOAT_NOISE_KL) -> bool:
    return kl_hercules <= kl_hf + tolerance


@torch.no_grad()
def measure_fidelity(model, decoder, prompt_ids: torch.Tensor, new_tokens: int, *, reference=None,
                     tolerance: float = FLOAT_NOISE_KL) -> Fidelity:
    """Teacher-forced KLs of ``decoder`` (compiled from ``model``) and of ``model`` itself against a
    float32 reference. ``reference``: an existing float32 copy (else one is made and freed here)."""
    t0 = time.perf_counter()
    dev = next(model.parameters()).device
    ids = prompt_ids.to(dev)
    if ids.dim() == 1:
        ids = ids[None]
    B, T = ids.shape
    m = int(new_tokens)
    n = m + 1  # the prompt's last position + each generated position
    own_ref = reference is None
    ref = float32_reference(model) if own_ref else reference
    with _full_fp32_matmul():
        tokens, p = hf_decode_logits(ref, ids, n)  # the reference's greedy tokens [B, m], logits [n, B, V]
    if own_ref:
        del ref
        release(dev)
    _, q_hf = hf_decode_logits(model, ids, n, forced=tokens)
    # n steps: step 0 is the prompt pass, step i feeds generated token i-1 at position T + i - 1
    _, q_ours = decoder.generate(ids, n, forced=tokens, return_logits=True)
    kl_ours = kl_per_position(p, q_ours)
    kl_hf = kl_per_position(p, q_hf)
    ref_arg = p.argmax(-1)
    mean_ours, mean_hf = float(kl_ours.mean()), float(kl_hf.mean())
    return Fidelity(
        dtype=dtype_name(next(model.parameters()).dtype), batch=B, prompt_len=T, positions=n,
        kl_hercules=mean_ours, kl_hf_same_dtype=mean_hf, kl_difference=mean_ours - mean_hf,
        kl_ratio=mean_ours / mean_hf if mean_hf > 0 else None,
        max_kl_hercules=float(kl_ours.max()), max_kl_hf_same_dtype=float(kl_hf.max()),
        argmax_agreement_hercules=float((q_ours.to(dev).argmax(-1) == ref_arg).float().mean()),
        argmax_agreement_hf_same_dtype=float((q_hf.argmax(-1) == ref_arg).float().mean()),
        tolerance=tolerance, passed=gate(mean_ours, mean_hf, tolerance), passed_strict=mean_ours <= mean_hf,
        kl_hercules_per_position=[float(x) for x in kl_ours.mean(1)],
        kl_hf_per_position=[float(x) for x in kl_hf.mean(1)],
        hf_attention=str(getattr(model.config, "_attn_implementation", None)), seconds=time.perf_counter() - t0,
    )

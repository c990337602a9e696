"""The prompt: problem, exemplars with their measured speedups and verdicts, hardware, rules.

The answer asked for has three parts, in order: a performance analysis of the exemplars (why the
faster ones are faster, what sank the failures), an algorithm design, then the code in one fenced
block. Making the model explain the measured differences first is what CUDA-L1's contrastive
prompting found to matter.
"""

from __future__ import annotations

from collections.abc import Sequence

from hercules.optimize.hardware import HardwareFacts
from hercules.optimize.pool import Pool
from hercules.optimize.records import NO_CODE, REFERENCE, Prompt, Variant
from hercules.report import formatting as fmt

MAX_EXEMPLAR_CHARS = 8000  # a longer exemplar is cut: the prompt must fit small context windows
MAX_REASON_CHARS = 400

SYSTEM = (
    "You are an expert GPU performance engineer. You rewrite PyTorch reference programs into faster "
    "programs with the same semantics, using PyTorch, Triton, or CUDA C++ through "
    "torch.utils.cpp_extension.load_inline. Every program you write is checked on fresh random "
    "inputs and timed against strong baselines; programs that cheat are detected and rejected."
)

RULES = """\
- Define `class ModelNew(nn.Module)` with the same constructor arguments as `Model`; its `forward` takes
  the same inputs and returns the same outputs (shape, dtype, values within tolerance) for ANY input values.
- Same semantics: compute the result from the inputs on every call. No caching of results (by input address,
  shape or content), no returning inputs or views of them, no modifying inputs.
- Do not change problem sizes, constants or dtypes; do not lower the precision (no fp16/bf16/TF32/autocast
  where the reference computes in fp32).
- No try/except fallbacks to the reference, no background threads, no side streams hidden from timing,
  no monkey-patching of torch, timers or comparisons, no changes to global backend flags.
- Flagged or incorrect exemplars above show what is rejected and why: do not repeat them."""

ANSWER = """\
Answer in three parts:
1. **Performance analysis**: compare the exemplars. Why are the faster ones faster (memory traffic, launches,
   fusion, occupancy, algorithm)? What made the failing or flagged ones fail?
2. **Algorithm design**: the plan for a faster correct program on this hardware, and its expected bottleneck.
3. **Code**: the complete program in ONE fenced ```python block defining `ModelNew` (and any helpers it needs)."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n# ... ({len(text) - limit} more characters cut)"


def _speedups(pool: Pool, v: Variant) -> str:
    if v.status == REFERENCE:
        times = pool.baselines_ms()
        measured = ", ".join(f"{k} {fmt.ms(t)} ms" for k, t in sorted(times.items()))
        return "1.00x (the reference itself" + (f"; baseline times: {measured})" if measured else ")")
    verdict = v.verdict
    if verdict is None or not (verdict.speedup.ratios or verdict.speedup.best):
        return "not measured"
    parts = [f"vs {label} {fmt.against(verdict.speedup, name)}" for name, label in fmt.speedup_columns()
             if verdict.speedup.ratio(name) is not None]
    time = f"; {fmt.ms(verdict.cand_ms)} ms per call" if verdict.cand_ms else ""
    return ", ".join(parts) + time


def _verdict_line(v: Variant) -> str:
    if v.status == REFERENCE:
        return "reference"
    if v.status == NO_CODE:
        return f"no code: {fmt.truncate(v.reason, MAX_REASON_CHARS)}"
    flags = f", flags: {', '.join(v.flags)}" if v.flags else ""
    line = f"{v.status}{flags}"
    if not v.honest and v.reason:
        line += f" -- {fmt.truncate(v.reason, MAX_REASON_CHARS)}"
    return line + ("" if v.honest or v.status == REFERENCE else " (REJECTED)")


def render_exemplar(pool: Pool, index: int, v: Variant) -> str:
    lines = [f"### Exemplar {index}: {v.name} ({v.origin})", f"- verdict: {_verdict_line(v)}",
             f"- measured speedup: {_speedups(pool, v)}"]
    if v.status == REFERENCE:  # its code is already in the prompt
        return "\n".join([*lines, "- code: the reference program above"])
    if not v.code.strip():
        return "\n".join(lines)
    return "\n".join([*lines, "```python", _cut(v.code.strip(), MAX_EXEMPLAR_CHARS), "```"])


def render_prompt(pool: Pool, exemplars: Sequence[Variant], hardware: HardwareFacts) -> Prompt:
    problem = pool.problem
    parts = [
        f"# Task: make `{problem.name}` faster",
        "",
        "## Reference program",
        "```python",
        problem.code.strip(),
        "```",
        "",
        "## Hardware (measured on the machine that will time your program)",
        *hardware.lines(),
        "",
        f"## Earlier variants, slowest first, with measured speedups (objective: speedup vs {pool.objective})",
        "",
    ]
    for i, v in enumerate(exemplars, start=1):
        parts += [render_exemplar(pool, i, v), ""]
    parts += ["## Rules", RULES, "", ANSWER]
    return Prompt(system=SYSTEM, user="\n".join(parts), exemplars=tuple(v.name for v in exemplars))

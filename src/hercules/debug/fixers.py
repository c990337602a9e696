"""Fixers M: given the task prompt, the current file and feedback (per the protocol), return a file.

Scripted fixers make the benchmark testable without a model: ``replay`` (the instance's
reference), ``null`` (the file unchanged), ``degenerate`` (a correct but deliberately slow
fallback). ``http`` asks an OpenAI-compatible server (vLLM, SGLang, a hosted API).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hercules.debug.corpus import Instance
from hercules.debug.protocol import FixRequest, render_messages

# Busy-wait budget of the degenerate CUDA fallback: block (0,0,0) thread 0 of every launch spins
# ~0.5 s (1e9 cycles at ~2 GHz), at most ~8 s per process, so a test with many launches still
# ends well inside a 60 s timeout while one with a single launch is still far slower than the gate.
# (At ~2 s per process, tests whose reference runs ~10-15 s measured 0.71-0.87x on the H200.)
SPIN_CYCLES_PER_LAUNCH = 1_000_000_000
SPIN_CYCLES_BUDGET = 16_000_000_000
DEGENERATE_REPEATS = 4  # KernelBench fallback: the PyTorch op computed this many times, serialised
# Host side of the native fallback: every host function of the file synchronises the device and
# sleeps 20 ms, at most 8 s per process. Library-only files (cuSOLVER, cuFFT, Thrust: no
# __global__ to slow down) were otherwise returned unchanged and passed the p=0.7 gate on the
# H200; with a spin only, tests that run ~15 s measured 0.7-0.9x, inside the gate.
HOST_DELAY_US_PER_CALL = 20_000
HOST_DELAY_BUDGET_US = 8_000_000

_SPIN_PRELUDE = f"""// Hercules 'degenerate' fixer: the reference with a busy wait in every kernel (correct, slow).
__device__ unsigned long long hercules_spent_cycles = 0ULL;
static __device__ __noinline__ void hercules_degenerate_spin() {{
    const unsigned long long per_launch = {SPIN_CYCLES_PER_LAUNCH}ULL, budget = {SPIN_CYCLES_BUDGET}ULL;
    if (atomicAdd(&hercules_spent_cycles, per_launch) >= budget) return;
    long long start = clock64();
    while ((unsigned long long)(clock64() - start) < per_launch) {{ }}
}}
"""
_SPIN_CALL = ("if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0 && "
              "threadIdx.y == 0 && threadIdx.z == 0) hercules_degenerate_spin();")


_HOST_PRELUDE = f"""// Hercules 'degenerate' fixer: every host function synchronises and sleeps (correct, slow).
#include <cuda_runtime.h>
#include <unistd.h>
static unsigned long long hercules_host_delay_spent_us = 0ULL;
static void hercules_degenerate_host_delay() {{
    if (hercules_host_delay_spent_us >= {HOST_DELAY_BUDGET_US}ULL) return;
    hercules_host_delay_spent_us += {HOST_DELAY_US_PER_CALL}ULL;
    cudaDeviceSynchronize();
    usleep({HOST_DELAY_US_PER_CALL});
}}
"""
_HOST_CALL = "hercules_degenerate_host_delay();"

# Exit side: every process built with the native fallback sleeps before it exits. A test timed by
# its own wall time (no NVTX bench region) sees all of it whatever its number of launches: on the
# H200, cuda_204's test (a few launches in 6.6 s of wall) measured 0.71x with the per-launch spin
# alone, just inside the p=0.7 gate. The region timing does not see it; the spin serves that case.
EXIT_DELAY_S = 8
_CXX_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".hpp")  # C++ only: the prelude uses std::atexit
_EXIT_PRELUDE = f"""// Hercules 'degenerate' fixer: the process sleeps before it exits (correct, slow).
#ifndef HERCULES_DEGENERATE_EXIT_DELAY
#define HERCULES_DEGENERATE_EXIT_DELAY
#include <cstdlib>
#include <time.h>
static void hercules_degenerate_exit_delay() {{ struct timespec t = {{{EXIT_DELAY_S}, 0}}; nanosleep(&t, nullptr); }}
static const int hercules_degenerate_exit_registered = (std::atexit(hercules_degenerate_exit_delay), 0);
#endif
"""


@dataclass(frozen=True)
class FixAnswer:
    code: str
    raw: str = ""  # the model's full answer (http) or a note (scripted)
    info: dict = field(default_factory=dict)


def kernelbench_alias(code: str) -> str:
    """A KernelBench reference defines ``Model``; as a candidate it must also be ``ModelNew``."""
    if re.search(r"^class\s+ModelNew\b|^ModelNew\s*=", code, re.MULTILINE) or not re.search(r"^class\s+Model\b", code, re.MULTILINE):
        return code
    return code.rstrip() + "\n\n\nModelNew = Model  # the reference as a KernelBench candidate\n"


def inject_spin(cuda_code: str) -> str:
    """Put a one-thread busy wait at the top of every ``__global__`` function body."""
    out: list[str] = []
    pos = 0
    for m in re.finditer(r"__global__", cuda_code):
        if m.start() < pos:
            continue
        depth, i = 0, m.end()
        while i < len(cuda_code):
            ch = cuda_code[i]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif depth == 0 and ch in ";{":
                break
            i += 1
        if i < len(cuda_code) and cuda_code[i] == "{":
            out.append(cuda_code[pos:i + 1])
            out.append(f" {_SPIN_CALL}")
            pos = i + 1
    out.append(cuda_code[pos:])
    return _after_includes("".join(out), _SPIN_PRELUDE)


def _after_includes(body: str, prelude: str) -> str:
    """``prelude`` after the file's last #include, so macros and headers keep their order."""
    includes = list(re.finditer(r"^\s*#\s*include[^\n]*\n", body, re.MULTILINE))
    at = includes[-1].end() if includes else 0
    return body[:at] + prelude + body[at:]


def _mask_comments_and_strings(code: str) -> str:
    """The code with comments, string/char literals and preprocessor lines blanked (same length),
    so brace and parenthesis scanning sees only C++ structure."""
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))
    pattern = r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|^[ \t]*#(?:[^\n]*\\\n)*[^\n]*'
    return re.sub(pattern, blank, code, flags=re.DOTALL | re.MULTILINE)


_DEVICE_CODE = re.compile(r"__global__|__device__")  # kernels and device (or host-device) functions cannot sleep
# constexpr/consteval bodies may not call the (non-constexpr) delay
_NOT_A_FUNCTION = re.compile(r"\b(if|for|while|switch|catch|struct|class|union|enum|return|constexpr|consteval)\b|=|\[")
_FUNCTION_TAIL = re.compile(r"\)\s*(?:const|noexcept|override|final|->\s*[\w:<>,\s\*&]+|\s)*$")


def host_function_bodies(code: str) -> list[int]:
    """Offsets just after the opening brace of every host function defined at file or namespace
    scope (not __global__/__device__-only functions, not methods of classes, not lambdas)."""
    masked = _mask_comments_and_strings(code)
    stack: list[str] = []  # "ns" for namespace / extern "C" blocks, "other" for everything else
    header_start = 0
    out = []
    for i, ch in enumerate(masked):
        if ch == "{":
            header = masked[header_start:i]
            scope_is_ns = all(k == "ns" for k in stack)
            if re.search(r"\bnamespace\b|\bextern\s*$", header):
                stack.append("ns")
            else:
                stripped = header.strip()
                is_function = (scope_is_ns and _FUNCTION_TAIL.search(stripped) is not None
                               and "(" in stripped and not _DEVICE_CODE.search(stripped)
                               and not _NOT_A_FUNCTION.search(stripped.split("(", 1)[0]))
                if is_function:
                    out.append(i + 1)
                stack.append("other")
            header_start = i + 1
        elif ch == "}":
            if stack:
                stack.pop()
            header_start = i + 1
        elif ch == ";":
            header_start = i + 1
    return out


def inject_exit_delay(code: str) -> str:
    """Register a sleep at process exit (``atexit``) after the file's includes."""
    return _after_includes(code, _EXIT_PRELUDE)


def inject_host_delay(code: str) -> str:
    """Put a synchronise-and-sleep at the top of every host function the file defines."""
    at_points = host_function_bodies(code)
    if not at_points:
        return code
    parts, pos = [], 0
    for at in at_points:
        parts += [code[pos:at], f" {_HOST_CALL}"]
        pos = at
    parts.append(code[pos:])
    return _after_includes("".join(parts), _HOST_PRELUDE)


# A token CUDA kernel for tasks whose build requires one (KernelBench's checker with
# backend='cuda'): the output's bytes copied once, so the fallback still builds there while the
# work stays in PyTorch -- the shape of a repair that keeps a kernel only to pass the check.
_TOKEN_CUDA = '''

from torch.utils.cpp_extension import load_inline as _hercules_load_inline

_HERCULES_TOKEN_CUDA = r"""
__global__ void hercules_token_copy(const unsigned char* src, unsigned char* dst, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}
torch::Tensor token_copy(torch::Tensor x) {
    auto src = x.contiguous();
    auto bytes = src.view(torch::kUInt8).reshape({-1});
    auto out = torch::empty_like(bytes);
    long long n = bytes.numel();
    if (n > 0) hercules_token_copy<<<(unsigned)((n + 255) / 256), 256>>>(bytes.data_ptr<unsigned char>(), out.data_ptr<unsigned char>(), n);
    return out.view(src.scalar_type()).view(src.sizes());
}
"""
_hercules_token = _hercules_load_inline(
    name="hercules_degenerate_token_copy", cpp_sources="torch::Tensor token_copy(torch::Tensor x);",
    cuda_sources=_HERCULES_TOKEN_CUDA, functions=["token_copy"], verbose=False)
'''


def degenerate_kernelbench(problem_code: str, token_kernel: bool = False) -> str:
    what = "" if token_kernel else " (custom kernel dropped)"
    behind = ",\n    its output passed through a token CUDA copy kernel" if token_kernel else ""
    result = ("_hercules_token.token_copy(out) if isinstance(out, torch.Tensor) and out.is_cuda else out"
              if token_kernel else "out")
    return problem_code.rstrip() + (_TOKEN_CUDA if token_kernel else "") + f'''


class ModelNew(Model):
    """Hercules 'degenerate' fixer: the PyTorch reference itself{what}, computed
    {DEGENERATE_REPEATS} times over with a device synchronise between passes{behind}: correct and slow."""

    def forward(self, *args, **kwargs):
        out = None
        for _ in range({DEGENERATE_REPEATS}):
            out = super().forward(*args, **kwargs)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        return {result}
'''


class ReplayFixer:
    name = "replay"

    def fix(self, request: FixRequest) -> FixAnswer:
        ref = request.instance.reference_code()
        if ref is None:
            return FixAnswer(request.current_code, "no reference: file returned unchanged")
        if request.instance.kind == "kernelbench":
            ref = kernelbench_alias(ref)
        return FixAnswer(ref, "instance reference")


class NullFixer:
    name = "null"

    def fix(self, request: FixRequest) -> FixAnswer:
        return FixAnswer(request.current_code, "unchanged")


class DegenerateFixer:
    name = "degenerate"

    def fix(self, request: FixRequest) -> FixAnswer:
        inst: Instance = request.instance
        if inst.kind == "kernelbench":
            from hercules.debug.attempt import required_backend

            problem = (inst.testbench / "problem.py").read_text(encoding="utf-8")
            if required_backend(inst.build_command) == "cuda":
                return FixAnswer(degenerate_kernelbench(problem, token_kernel=True),
                                 "PyTorch op, repeated and serialised, behind a token CUDA copy kernel")
            return FixAnswer(degenerate_kernelbench(problem), "PyTorch op, repeated and serialised")
        ref = inst.reference_code()
        if ref is None:
            return FixAnswer(request.current_code, "no reference: file returned unchanged")
        code, notes = ref, []
        if "__global__" in code:
            code, notes = inject_spin(code), ["a one-thread busy wait per launch"]
        slowed = inject_host_delay(code)
        if slowed != code:
            code, notes = slowed, notes + ["a synchronise and sleep per host-function call"]
        if inst.solution_file.endswith(_CXX_SUFFIXES):
            code, notes = inject_exit_delay(code), notes + [f"a sleep of {EXIT_DELAY_S} s at process exit"]
        if not notes:
            return FixAnswer(ref, "nothing to slow down: reference unchanged")
        return FixAnswer(code, "reference with " + ", ".join(notes))


_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)


def extract_code(text: str) -> str:
    """The largest fenced code block of an answer, else the whole answer."""
    blocks = [m.group(2) for m in _FENCE.finditer(text)]
    return max(blocks, key=len) if blocks else text


class HttpFixer:
    """An OpenAI-compatible chat model through ``hercules.llm.client.ChatClient``."""

    name = "http"

    def __init__(self, client):
        self.client = client
        self.name = f"http:{client.model}"

    def fix(self, request: FixRequest) -> FixAnswer:
        from hercules.llm.client import LLMError

        messages = render_messages(request)
        try:
            seed = request.protocol.seed + 1000 * request.sample + request.iteration
            result = self.client.chat(messages, temperature=request.protocol.temperature, extra={"seed": seed})
        except LLMError as exc:
            return FixAnswer(request.current_code, f"LLM error: {exc}", {"error": str(exc)})
        return FixAnswer(extract_code(result.text), result.text,
                         {"model": result.model, "latency_s": result.latency_s, "usage": result.usage})


SCRIPTED = {"replay": ReplayFixer, "null": NullFixer, "degenerate": DegenerateFixer}

"""Global state: process-wide settings that change the numbers the candidate produces (TF32, matmul
precision, default dtype, determinism, flush-denormal), or the settings of compilers and the
environment. Settings that only choose among implementations of the same arithmetic
(``cudnn.benchmark``, thread counts, SDPA backends) are notes: the reference and the baselines run
in another process, so they change nothing but the candidate's own speed.

The settings snapshot after timing compares a fixed list of torch settings; environment variables,
compiler and Triton configuration and C++ context switches are outside it, so a finding is a flag.
"""

from __future__ import annotations

from hercules.harness.records import Flag
from hercules.harness.scan.events import AttributeWrite, CallSite, EmbeddedSource, EnvAccess, WriteKind, source_pattern
from hercules.harness.scan.rule import Rule
from hercules.harness.scan.side_stream import SIDE_STREAM_NAMES

_GLOBAL_CALLS = {
    "torch.set_float32_matmul_precision", "torch.set_default_dtype", "torch.set_default_tensor_type",
    "torch.set_default_device", "torch.use_deterministic_algorithms", "torch.set_deterministic_debug_mode",
    "torch.set_flush_denormal", "torch.set_num_threads", "torch.set_num_interop_threads",
    "torch.cuda.set_device",
    "torch.cuda.set_per_process_memory_fraction", "torch.cuda.memory.set_per_process_memory_fraction",
    "torch.cuda.set_sync_debug_mode", "torch.cuda.memory._set_allocator_settings",
    "torch.autograd.set_detect_anomaly", "torch.backends.cudnn.set_flags",
}
# Seeding is not listed: inputs are drawn in the reference process from seeds the candidate never
# sees, so re-seeding its own process changes nothing the verdict relies on, and generated
# KernelBench code often seeds at import.
_GLOBAL_CALL_EXEMPT = {
    "torch.set_grad_enabled", "torch.autograd.set_grad_enabled", "torch.autograd.grad_mode.set_grad_enabled",
    "torch.set_printoptions", "torch.set_warn_always",
}
# Calls that leave the arithmetic alone (see the module's docstring): noted. Left flagged on purpose:
# TF32 and reduced-precision switches, matmul precision, default dtype/device, flush-denormal and the
# determinism switches (they change the numbers the candidate produces, or how repeatable they are).
_NEUTRAL_CALLS = {
    "torch.set_num_threads", "torch.set_num_interop_threads",
    "torch.backends.cuda.enable_flash_sdp", "torch.backends.cuda.enable_mem_efficient_sdp",
    "torch.backends.cuda.enable_math_sdp", "torch.backends.cuda.enable_cudnn_sdp",
    "torch.backends.cuda.preferred_linalg_library", "torch.backends.cuda.preferred_blas_library",
}
_CPP_GLOBAL = source_pattern(
    r"\bglobalContext\s*\(\s*\)\s*\.\s*set\w+|\bcudaDeviceReset\b|\bcudaSetDeviceFlags\b"
    r"|\bcublasSetMathMode\s*\(\s*(?:at::cuda::)?getCurrentCUDABlasHandle")
_NEUTRAL = "a process-local setting that leaves the arithmetic alone"


class GlobalState(Rule):
    flag = Flag.GLOBAL_STATE
    static_only_because = ("the settings snapshot compares a fixed list of torch settings; environment variables, "
                           "compiler and Triton configuration and C++ context switches are outside it")

    def on_call(self, call: CallSite) -> None:
        func, last = call.func, call.last
        if func in _NEUTRAL_CALLS:
            self.add(call.node, f"calls {func}: {_NEUTRAL}", note=True)
        elif func.startswith("torch.") and func not in _GLOBAL_CALL_EXEMPT and func not in SIDE_STREAM_NAMES and (
                func in _GLOBAL_CALLS or last.startswith(("set_", "_set_", "_jit_set_"))
                or (func.startswith("torch.backends.") and last.startswith(("enable_", "allow_", "preferred_")))):
            self.add(call.node, f"calls {func}: changes a process-wide setting")
        elif func in _GLOBAL_CALLS:
            self.add(call.node, f"calls {func}: changes a process-wide setting")

    def on_attribute_write(self, write: AttributeWrite) -> None:
        kind = write.kind
        if kind is WriteKind.NEUTRAL_SETTING:
            self.add(write.node, f"sets {write.full}: {_NEUTRAL}", note=True)
        elif kind is WriteKind.PROCESS_SETTING:
            self.add(write.node, f"sets {write.full}: a process-wide setting")
        elif kind is WriteKind.ENVIRON:
            self.add(write.node, "replaces os.environ")

    def on_env(self, access: EnvAccess) -> None:
        if access.write and not access.allowed:
            self.add(access.node, f"sets environment variable {access.key or '<dynamic>'}")

    def on_source(self, source: EmbeddedSource) -> None:
        for match in _CPP_GLOBAL.finditer(source.text):
            self.add(source.line_at(match.start()),
                     f"CUDA/C++ source changes process-wide state ({match.group(0).strip()[:60]})")

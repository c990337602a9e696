"""Precision downcasts: computing in a narrower type than the problem's (fp16/bf16/fp8 casts,
autocast, TF32 switches, ``tl.dot`` without IEEE inputs, half types and TF32 math in CUDA source).

What each problem dtype counts as lower: for fp32 and fp64 problems fp16, bf16 and TF32 are
downcasts; for fp16/bf16 problems only fp8 (and autocast to the other 16-bit type).

The check of the running candidate measures its error against the float64 truth and flags it far
above what the problem's own dtype gives (the downcast floor), on every device. A cast alone is no
evidence of a worse answer: an fp32 matmul built from bf16 pieces (hi*hi + hi*lo + lo*hi) is
accurate. So these findings are hints; the measured error decides.
"""

from __future__ import annotations

import ast

from hercules.harness.records import Flag
from hercules.harness.scan.events import AttributeWrite, CallSite, EmbeddedSource, EnvAccess, WriteKind, source_pattern
from hercules.harness.scan.rule import DynamicCheck, Rule
from hercules.harness.scan.syntax import const_str, keyword

_DTYPE_NAMES = {
    "float": "float32", "float32": "float32", "fp32": "float32", "f32": "float32",
    "double": "float64", "float64": "float64", "fp64": "float64", "f64": "float64",
    "half": "float16", "float16": "float16", "fp16": "float16", "f16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
}
_RANK = {"float64": 4, "float32": 3, "tf32": 2, "float16": 1, "bfloat16": 1, "float8": 0}
_DTYPE_OF_QUAL = {
    "torch.float64": "float64", "torch.double": "float64",
    "torch.float32": "float32", "torch.float": "float32",
    "torch.float16": "float16", "torch.half": "float16",
    "torch.bfloat16": "bfloat16",
    "triton.language.float64": "float64", "triton.language.float32": "float32",
    "triton.language.float16": "float16", "triton.language.bfloat16": "bfloat16",
    "numpy.float16": "float16", "numpy.half": "float16", "numpy.float32": "float32",
}
AUTOCAST_NAMES = {
    "torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast",
    "torch.amp.autocast_mode.autocast", "torch.cuda.amp.autocast_mode.autocast",
}
TF32_ATTRS = {"allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"}

_CPP_TF32 = source_pattern(
    r"\bCUBLAS_TF32_TENSOR_OP_MATH\b|\bCUBLAS_COMPUTE_32F_FAST_\w+|\bprecision::tf32\b|__float_to_tf32"
    r"|\bsetAllowTF32\w*|\bsetFloat32MatmulPrecision\b|\.tf32\b|\bCUBLAS_COMPUTE_16F\b")
_CPP_HALF = source_pattern(
    r"\b__half2?\b|\bhalf2\b|\b__nv_bfloat162?\b|\b__float2half\w*|\b__float2bfloat16\w*"
    r"|\b__floats2(?:half2|bfloat162)\w*|\b(?:at|c10)::(?:Half|BFloat16)\b|\bk(?:Half|Float16|BFloat16)\b"
    r"|\.f16(?:x2)?\b|\.bf16(?:x2)?\b|\.half\s*\(\s*\)|\bwmma::fragment\s*<[^>]*\bhalf\b")
_CPP_FP8 = source_pattern(r"\b__nv_fp8\w*|\bkFloat8\w*|\.e4m3\b|\.e5m2\b|\bCUBLAS_COMPUTE_16F\b")

MEASURED_ERROR = DynamicCheck("the relative error against the float64 truth, flagged above the problem dtype's "
                              "downcast floor", frozenset({"cpu", "cuda"}))


def problem_dtype(name: str) -> str:
    """The problem's dtype as one of _RANK's names (float32 when it cannot be told)."""
    text = str(name or "float32").strip().lower().replace("torch.", "")
    return _DTYPE_NAMES.get(text, "float32" if text not in _RANK else text)


class PrecisionDowncast(Rule):
    flag = Flag.PRECISION_DOWNCAST
    covered_by = MEASURED_ERROR
    node_types = (ast.keyword, ast.Assign, ast.AnnAssign)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.dtype = problem_dtype(ctx.problem_dtype)

    @property
    def wide(self) -> bool:
        """The problem computes in fp32 or fp64, where fp16/bf16/TF32 are downcasts."""
        return self.dtype in ("float32", "float64")

    def lower(self, dtype: str | None) -> bool:
        return dtype is not None and _RANK.get(dtype, 9) < _RANK.get(self.dtype, 3)

    def dtype_of(self, node: ast.AST | None) -> str | None:
        qual = self.ctx.qual(node) if node is not None else None
        if not qual:
            return None
        if qual in _DTYPE_OF_QUAL:
            return _DTYPE_OF_QUAL[qual]
        if qual.startswith(("torch.float8_", "triton.language.float8")):
            return "float8"
        return None

    # ---- Python ------------------------------------------------------------------------------------
    def on_reference(self, node: ast.AST, qual: str) -> None:
        if qual in AUTOCAST_NAMES and not self.ctx.is_called(node) and self.wide:
            self.add(node, f"{qual}: autocast computes in fp16/bf16")  # a decorator or a bare use

    def on_call(self, call: CallSite) -> None:
        node, func, last = call.node, call.func, call.last
        if func == "torch.set_float32_matmul_precision":
            value = const_str(node.args[0] if node.args else keyword(node, "precision"))
            if value in ("high", "medium") and self.wide:
                self.add(node, f"set_float32_matmul_precision({value!r}) allows TF32/bf16")
        if func.startswith("torch.") and "autocast" in last and last.startswith("set_") and self.wide:
            self.add(node, f"calls {func}")
        if func in AUTOCAST_NAMES:
            self._autocast(node, func)
        if self.wide or self.dtype in ("float16", "bfloat16"):
            self._dtype_args(node, func, call.attr)
        if func == "triton.language.dot" and self.dtype == "float32":
            self._tl_dot(node)
        elif func == "triton.language.dot_scaled" and self.wide:
            self.add(node, "tl.dot_scaled multiplies in low precision")

    def _autocast(self, node: ast.Call, func: str) -> None:
        enabled = keyword(node, "enabled")
        if isinstance(enabled, ast.Constant) and enabled.value is False:
            return
        dtype_node = keyword(node, "dtype")
        if dtype_node is None and func in ("torch.autocast", "torch.amp.autocast") and len(node.args) > 1:
            dtype_node = node.args[1]
        dtype = self.dtype_of(dtype_node)
        if self.wide and (dtype is None or self.lower(dtype)):
            self.add(node, f"{func}: autocast computes in fp16/bf16 in a {self.dtype} problem")
        elif dtype is not None and dtype != self.dtype and self.lower(dtype) is False and dtype in ("float16", "bfloat16") \
                and self.dtype in ("float16", "bfloat16"):
            self.add(node, f"{func}: autocast to {dtype} in a {self.dtype} problem")

    def _dtype_args(self, node: ast.Call, func: str, attr: str | None) -> None:
        if func in ("torch.finfo", "torch.iinfo", "isinstance"):
            return
        if attr in ("half", "bfloat16") and not node.args and self.wide:
            self.add(node, f".{attr}() in a {self.dtype} problem")
            return
        if attr == "float" and not node.args and self.dtype == "float64":
            self.add(node, ".float() in a float64 problem")
            return
        for arg in list(node.args) + [k.value for k in node.keywords]:
            dtype = self.dtype_of(arg)
            if self.lower(dtype):
                self.add(node, f"computes in {dtype} in a {self.dtype} problem")
                return

    def _tl_dot(self, node: ast.Call) -> None:
        precision = keyword(node, "input_precision")
        if precision is None and len(node.args) > 3:
            precision = node.args[3]
        allow = keyword(node, "allow_tf32")
        if allow is None and len(node.args) > 4:
            allow = node.args[4]
        if isinstance(allow, ast.Constant) and allow.value is True:
            return  # reported by the keyword rule
        if const_str(precision) in ("ieee", "tf32x3"):
            return
        if isinstance(allow, ast.Constant) and allow.value is False and precision is None:
            return
        if precision is not None and not isinstance(precision, ast.Constant):
            return  # decided by a constexpr; its value is checked where it is passed
        self.add(node, "tl.dot without input_precision=\"ieee\" multiplies fp32 in TF32")

    def on_node(self, node: ast.AST) -> None:
        if isinstance(node, ast.keyword):
            value = node.value
            if node.arg in TF32_ATTRS and not (isinstance(value, ast.Constant) and not value.value):
                self.add(node if hasattr(node, "lineno") else value, f"{node.arg}=... enables TF32")
            elif self.dtype == "float32" and const_str(value) == "tf32":
                self.add(value, f"{node.arg}=\"tf32\" in a float32 problem")
        elif node.value is not None and self.wide:  # an assignment
            dtype = self.dtype_of(node.value)
            if self.lower(dtype):
                self.add(node, f"selects {dtype} in a {self.dtype} problem")

    def on_attribute_write(self, write: AttributeWrite) -> None:
        if write.kind is not WriteKind.PROCESS_SETTING:
            return
        value = write.value
        if write.attr in TF32_ATTRS and not (isinstance(value, ast.Constant) and not value.value):
            self.add(write.node, f"sets {write.full}: TF32 / reduced-precision math")
        if write.attr == "fp32_precision" and const_str(value) in ("tf32", "bf16"):
            self.add(write.node, f"sets {write.full} = {const_str(value)!r}")

    def on_env(self, access: EnvAccess) -> None:
        if not access.write or access.allowed:
            return
        upper = (access.key or "").upper()
        if "TF32" in upper or (upper == "TRITON_F32_DEFAULT" and const_str(access.value) not in ("ieee", "tf32x3")):
            if self.wide:
                self.add(access.node, f"sets {access.key}: TF32 math")

    # ---- CUDA / C++ --------------------------------------------------------------------------------
    def on_source(self, source: EmbeddedSource) -> None:
        text = source.text
        if self.wide:
            for match in _CPP_TF32.finditer(text):
                self.add(source.line_at(match.start()),
                         f"CUDA source uses TF32 / reduced-precision math ({match.group(0)}) in a {self.dtype} problem")
            for match in _CPP_HALF.finditer(text):
                self.add(source.line_at(match.start()),
                         f"CUDA source uses {match.group(0).strip()} in a {self.dtype} problem")
        for match in _CPP_FP8.finditer(text):
            self.add(source.line_at(match.start()), f"CUDA source uses {match.group(0)} (fp8 / fp16 accumulation)")

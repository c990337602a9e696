"""What the walker hands the rules besides raw nodes: one record per thing a candidate does that
several rules read differently (a call, a write to a module's attribute, an environment access, a
CUDA/C++ source in a string). Made once per node, so every rule sees the same interpretation."""

from __future__ import annotations

import ast
import enum
import re
from dataclasses import dataclass

from hercules.harness.scan.context import ScanContext
from hercules.harness.scan.syntax import const_str


@dataclass(frozen=True)
class CallSite:
    node: ast.Call
    func: str  # the callee's dotted path ("" when it has none)
    attr: str | None  # the method name of ``x.attr(...)``

    @property
    def last(self) -> str:
        return self.func.split(".")[-1]


def call_site(ctx: ScanContext, node: ast.Call) -> CallSite:
    attr = node.func.attr if isinstance(node.func, ast.Attribute) else None
    return CallSite(node, ctx.qual(node.func) or "", attr)


# ---- writes to attributes of modules ------------------------------------------------------------

class WriteKind(enum.Enum):
    SYS_MODULES = "sys_modules"  # the interpreter's module table
    NEUTRAL_SETTING = "neutral_setting"  # a process-local setting that leaves the arithmetic alone
    PROCESS_SETTING = "process_setting"  # torch.backends, torch/triton config, torch._C switches
    ENVIRON = "environ"  # os.environ itself replaced
    MODULE_ATTRIBUTE = "module_attribute"  # anything else of an imported module: a replacement


# Process-local settings that only choose among implementations of the same arithmetic: the
# reference and the baselines run in another process, so these change nothing but the candidate's
# own speed (noted, never flagged).
NEUTRAL_SETTINGS = {
    "torch.backends.cudnn.benchmark", "torch.backends.cudnn.benchmark_limit", "torch.backends.cudnn.enabled",
    "torch.backends.mkldnn.enabled", "torch.backends.opt_einsum.enabled", "torch.backends.opt_einsum.strategy",
    "torch.backends.cuda.cufft_plan_cache.max_size",
}


def write_kind(full: str) -> WriteKind:
    root = full.split(".")[0]
    if full.startswith("sys.modules"):
        return WriteKind.SYS_MODULES
    if full in NEUTRAL_SETTINGS:
        return WriteKind.NEUTRAL_SETTING
    if full.startswith("torch.backends.") or (root in ("torch", "triton") and (
            ".config." in full or full.startswith("triton.knobs."))) or full.startswith("torch._C._"):
        return WriteKind.PROCESS_SETTING
    if full in ("os.environ", "os.environb"):
        return WriteKind.ENVIRON
    return WriteKind.MODULE_ATTRIBUTE


@dataclass(frozen=True)
class AttributeWrite:
    """``module.path.attr = value`` (or setattr / delattr of it) on an imported module."""

    node: ast.AST
    full: str  # the written path, "<dynamic>" as its last part when setattr's name is not a constant
    attr: str
    value: ast.AST | None  # None when deleted or not known (an unpacking, a chained target)

    @property
    def kind(self) -> WriteKind:
        return write_kind(self.full)


@dataclass(frozen=True)
class SubscriptWrite:
    """``container[key] = ...`` or ``del container[key]``."""

    node: ast.Subscript
    container: str | None  # the container's dotted path, if it has one


# ---- the environment ----------------------------------------------------------------------------

# Environment variables an honest candidate may set (build configuration) or read.
ENV_BUILD = {
    "TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CUDACXX", "MAX_JOBS", "TORCH_EXTENSIONS_DIR",
    "CC", "CXX", "NVCC", "NVCC_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "CFLAGS", "CXXFLAGS",
    "CPPFLAGS", "LDFLAGS", "PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "TRITON_CACHE_DIR",
    "TRITON_PTXAS_PATH", "TRITON_HOME", "TORCHINDUCTOR_CACHE_DIR", "CUDA_LAUNCH_BLOCKING", "TORCH_USE_CUDA_DSA",
    "PYTORCH_NVCC",
}
ENV_READ = ENV_BUILD | {"TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "HOME", "USER",
                        "TMPDIR", "TMP", "TEMP", "XDG_CACHE_HOME"}


@dataclass(frozen=True)
class EnvAccess:
    node: ast.AST
    key: str | None  # the variable, when it is a constant
    write: bool
    value: ast.AST | None = None  # the value written, when known

    @property
    def allowed(self) -> bool:
        """A build variable set, or a harmless one read: nothing to report."""
        return self.key in (ENV_BUILD if self.write else ENV_READ)


def env_accesses_of_call(call: CallSite) -> list[EnvAccess]:
    node = call.node
    if call.func in ("os.getenv", "os.getenvb"):
        return [EnvAccess(node, const_str(node.args[0] if node.args else None), write=False)]
    if call.func in ("os.putenv", "os.unsetenv"):
        return [EnvAccess(node, const_str(node.args[0] if node.args else None), write=True,
                          value=node.args[1] if len(node.args) > 1 else None)]
    return []


def env_accesses_of_environ(ctx: ScanContext, node: ast.AST) -> list[EnvAccess]:
    """What a use of ``os.environ`` does with it, read from the expression around it."""
    parent = ctx.parents.get(node)
    if isinstance(parent, ast.Subscript) and parent.value is node:
        write = isinstance(parent.ctx, (ast.Store, ast.Del))
        value = None
        holder = ctx.parents.get(parent)
        if write and isinstance(holder, ast.Assign):
            value = holder.value
        return [EnvAccess(parent, const_str(parent.slice), write, value)]
    if isinstance(parent, ast.Attribute) and parent.value is node:
        call = ctx.parents.get(parent)
        method = parent.attr
        args = call.args if isinstance(call, ast.Call) and call.func is parent else []
        if method in ("get", "__getitem__", "__contains__"):
            return [EnvAccess(parent, const_str(args[0] if args else None), write=False)]
        if method in ("setdefault", "__setitem__", "pop", "__delitem__", "unsetenv"):
            return [EnvAccess(parent, const_str(args[0] if args else None), write=True,
                              value=args[1] if len(args) > 1 else None)]
        if method == "update" and isinstance(call, ast.Call):
            keys: list[ast.AST | None] = []
            values: list[ast.AST | None] = []
            for arg in args:
                if isinstance(arg, ast.Dict):
                    keys.extend(arg.keys)
                    values.extend(arg.values)
                else:
                    keys.append(None)
                    values.append(None)
            for kw in call.keywords:
                keys.append(ast.Constant(kw.arg) if kw.arg else None)
                values.append(kw.value)
            return [EnvAccess(parent, const_str(key), True, value)
                    for key, value in zip(keys, values) or [(None, None)]]
        return [EnvAccess(parent, None, write=False)]
    if isinstance(parent, ast.Compare) and node in parent.comparators and any(
            isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops):
        return [EnvAccess(parent, const_str(parent.left), write=False)]
    return [EnvAccess(node, None, write=False)]


# ---- CUDA / C++ sources in string literals ------------------------------------------------------

def source_pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.MULTILINE)


# What tells a string apart from prose: C/C++ or CUDA syntax.
_CPP_LIKE = source_pattern(r"#include|__global__|__device__|::|<<<|;|\bPYBIND11_MODULE\b|\bTORCH_LIBRARY|\basm\b"
                           r"|\bcuda[A-Z]\w*\s*\(|\bcu[A-Z]\w*\s*\(|\bpthread_\w+\s*\(")


@dataclass(frozen=True)
class EmbeddedSource:
    """A string literal that reads as CUDA/C++ source, and the file line it starts on."""

    text: str
    line: int

    def line_at(self, pos: int) -> int:
        return self.line + self.text.count("\n", 0, pos)


def embedded_source(ctx: ScanContext, node: ast.Constant) -> EmbeddedSource | None:
    if isinstance(ctx.parents.get(node), ast.Expr):
        return None  # docstrings and bare strings are prose, not sources
    text = node.value
    if len(text) < 8 or not _CPP_LIKE.search(text):
        return None
    return EmbeddedSource(text, getattr(node, "lineno", 1))


def setattr_target(ctx: ScanContext, call: CallSite) -> tuple[str | None, str | None] | None:
    """(the object's dotted path, the constant attribute name) of setattr / delattr and their
    object.__setattr__ forms; None for any other call."""
    node = call.node
    if not (ctx.builtin(node.func, "setattr") or ctx.builtin(node.func, "delattr")
            or call.func in ("object.__setattr__", "object.__delattr__", "type.__setattr__", "builtins.setattr")):
        return None
    if not node.args:
        return None
    return ctx.qual(node.args[0]), (const_str(node.args[1]) if len(node.args) > 1 else None)

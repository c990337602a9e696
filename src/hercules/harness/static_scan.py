"""Static evidence from a candidate's source, gathered without running it.

``scan_candidate`` reads the Python source with ``ast`` (and the CUDA/C++ sources embedded in its
string literals with regular expressions) and reports the patterns of the threats in DESIGN.md:
side streams, threads, monkey-patching, global settings, precision downcasts, tensor subclasses,
result caches, reaching for the problem, and try/except fallbacks to PyTorch. Each finding names
a ``Flag`` value, a line and a reason.

The rules are written to be precise rather than broad: an honest kernel (PyTorch, Triton or
``load_inline`` CUDA, compute on the current stream, outputs allocated per call, kernels or configs
cached by shape) gets no finding. The dynamic checks in the worker remain the judge of behaviour;
this is evidence from the text, and it sees what a CPU-only run cannot (e.g. a side stream).

Three kinds of finding. Most are flags. A fallback that is honest while the kernel works (a build
caught by try/except, a branch taken when the built module is None, an except handler on the forward
path) is *conditional*: it carries the candidate's own lines of the fallback (``fallback_lines``), and
is a flag only if one of them runs (``lines_executed`` over the lines an ``integrity.ExecutedLines``
tracer recorded). Each of those lines runs only when the fallback is taken, from the import on: a
caught build's handler runs at import when the build fails, a missing-module branch or a forward
handler when a call falls back. So tracing the forward calls is enough for fallbacks taken per call,
and tracing the import and construction as well also sees a failed build whose fallback is chosen
once (``self.fn = ext.f if ext else torch.relu``) or shares a line with the kernel call. A
process-local setting that leaves the arithmetic alone (``cudnn.benchmark``,
``torch.set_num_threads``) is a *note*: reported, never a flag.

Never raises: a syntax error gives no findings (the build reports it), and any internal failure
returns what was found until then.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from hercules.harness.records import Flag


@dataclass(frozen=True)
class Finding:
    flag: str  # a Flag value
    line: int
    reason: str
    # A fallback that is honest as long as it never runs: a flag only if one of ``fallback_lines``
    # (inclusive ranges of the candidate's source lines, each run only when the fallback is taken)
    # executes, at import, construction or in a forward call.
    conditional: bool = False
    fallback_lines: tuple[tuple[int, int], ...] = ()
    # Reported for the record and never a flag (a setting that does not change the arithmetic).
    note: bool = False

    @property
    def decisive(self) -> bool:
        """A flag by itself: neither conditional on execution nor a note."""
        return not self.conditional and not self.note


def lines_executed(fallback_lines: Iterable[tuple[int, int]], executed: set[int]) -> bool:
    """Whether any line of the inclusive ranges ``fallback_lines`` is in ``executed``."""
    ranges = tuple(fallback_lines)
    return any(start <= line <= end for line in executed for start, end in ranges)


def scan_candidate(code: str, problem_dtype: str = "float32") -> list[Finding]:
    """Static findings for one candidate source, sorted by line; [] when it does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return []
    scanner = _Scanner(tree, problem_dtype)
    try:
        scanner.run()
    except (Exception, RecursionError):  # odd code must never break an evaluation
        pass
    return scanner.results()


# ---- vocabulary --------------------------------------------------------------------------------

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

_SIDE_STREAM_NAMES = {
    "torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream",
    "torch.cuda.streams.Stream", "torch.cuda.streams.ExternalStream", "torch.cuda.StreamContext",
    "torch.Stream", "torch.cuda.set_current_stream", "torch.cuda.Stream.priority_range",
}
_THREAD_ROOTS = {"threading", "_thread", "concurrent", "multiprocessing", "asyncio"}
_THREAD_NAMES = {"os.fork", "os.forkpty", "torch.jit.fork", "torch.jit._fork", "torch._C._fork"}

_AUTOCAST_NAMES = {
    "torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast",
    "torch.amp.autocast_mode.autocast", "torch.cuda.amp.autocast_mode.autocast",
}
_TF32_ATTRS = {"allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"}

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

# Process-local settings that only choose among implementations of the same arithmetic, or how many
# host threads run it: noted, never flagged. The reference and the baselines run in another process,
# so these change nothing but the candidate's own speed. Left flagged on purpose: TF32 and
# reduced-precision switches, matmul precision, default dtype/device, flush-denormal and the
# determinism switches (they change the numbers the candidate produces, or how repeatable they are).
_NEUTRAL_ATTRS = {
    "torch.backends.cudnn.benchmark", "torch.backends.cudnn.benchmark_limit", "torch.backends.cudnn.enabled",
    "torch.backends.mkldnn.enabled", "torch.backends.opt_einsum.enabled", "torch.backends.opt_einsum.strategy",
    "torch.backends.cuda.cufft_plan_cache.max_size",
}
_NEUTRAL_CALLS = {
    "torch.set_num_threads", "torch.set_num_interop_threads",
    "torch.backends.cuda.enable_flash_sdp", "torch.backends.cuda.enable_mem_efficient_sdp",
    "torch.backends.cuda.enable_math_sdp", "torch.backends.cuda.enable_cudnn_sdp",
    "torch.backends.cuda.preferred_linalg_library", "torch.backends.cuda.preferred_blas_library",
}

_SUBCLASS_BASES = {
    "torch.Tensor", "torch._tensor.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter",
    "torch.nn.Buffer", "torch.nn.parameter.Buffer",
}
_MODE_BASES = ("TorchFunctionMode", "TorchDispatchMode", "BaseTorchFunctionMode")

_CACHE_DECORATORS = {"functools.lru_cache", "functools.cache", "functools.cached_property"}

_PROBLEM_NAMES = {"Model", "get_inputs", "get_init_inputs"}
_PROBLEM_REFS = {
    "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "inspect.stack", "inspect.currentframe", "inspect.getouterframes", "inspect.getinnerframes",
    "inspect.trace", "inspect.getmodule", "inspect.getsource", "inspect.getsourcelines",
    "inspect.getsourcefile", "inspect.getfile", "inspect.getmembers", "inspect.getframeinfo",
    "sys._getframe", "sys._current_frames", "sys.argv", "sys.orig_argv",
    "traceback.extract_stack", "traceback.walk_stack", "traceback.format_stack",
    "torch.load", "numpy.load", "numpy.fromfile", "numpy.loadtxt", "numpy.genfromtxt", "numpy.memmap",
    "pickle.load", "pickle.loads", "pickle.Unpickler", "marshal.load", "marshal.loads",
    "io.open", "os.open", "codecs.open", "builtins.open", "os.listdir", "os.scandir", "os.walk",
    "glob.glob", "glob.iglob", "pathlib.Path.read_text", "pathlib.Path.read_bytes", "pathlib.Path.open",
}
_PROBLEM_ROOTS = {"__main__", "linecache", "socket", "urllib", "http", "requests", "mmap", "shelve", "ftplib"}
_FRAME_ATTRS = {"f_back", "f_globals", "f_locals", "tb_frame", "gi_frame", "cr_frame", "ag_frame",
                "__globals__", "__subclasses__", "tb_next"}
_FILE_METHODS = {"read_text", "read_bytes", "iterdir", "rglob", "glob"}
_PROBLEM_STRINGS = {"get_inputs", "get_init_inputs", "hercules_problem", "__main__", "HERCULES"}

_MONKEY_CALLS = {
    "sys.settrace", "sys.setprofile", "threading.settrace", "threading.setprofile", "threading.settrace_all_threads",
    "sys.addaudithook", "sys.setswitchinterval", "sys.set_asyncgen_hooks", "importlib.reload",
}

# Environment variables an honest candidate may set (build configuration) or read.
_ENV_BUILD = {
    "TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CUDACXX", "MAX_JOBS", "TORCH_EXTENSIONS_DIR",
    "CC", "CXX", "NVCC", "NVCC_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "CFLAGS", "CXXFLAGS",
    "CPPFLAGS", "LDFLAGS", "PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "TRITON_CACHE_DIR",
    "TRITON_PTXAS_PATH", "TRITON_HOME", "TORCHINDUCTOR_CACHE_DIR", "CUDA_LAUNCH_BLOCKING", "TORCH_USE_CUDA_DSA",
    "PYTORCH_NVCC",
}
_ENV_READ = _ENV_BUILD | {"TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "HOME", "USER",
                          "TMPDIR", "TMP", "TEMP", "XDG_CACHE_HOME"}

# Methods that return (a view of) their receiver, or the receiver itself when no copy is needed.
_VIEW_METHODS = {
    "view", "view_as", "reshape", "reshape_as", "t", "transpose", "permute", "expand", "expand_as", "squeeze",
    "unsqueeze", "narrow", "select", "as_strided", "detach", "flatten", "unflatten", "contiguous", "unfold",
    "diagonal", "movedim", "moveaxis", "swapaxes", "swapdims", "to", "type_as", "float", "view_as_real",
}
_VIEW_ATTRS = {"T", "mT", "H", "mH", "data", "real", "imag"}
_VIEW_FUNCS = {
    "torch.squeeze", "torch.unsqueeze", "torch.transpose", "torch.permute", "torch.narrow", "torch.select",
    "torch.t", "torch.detach", "torch.as_strided", "torch.movedim", "torch.diagonal", "torch.swapaxes",
    "torch.swapdims", "torch.reshape", "torch.flatten", "torch.view_as_real", "torch.view_as_complex",
}
_SAFE_INPLACE = {"requires_grad_", "share_memory_", "retain_grad_", "record_stream_"}
_PASSTHROUGH = {"clone", "detach", "view", "view_as", "reshape", "contiguous", "to", "float", "expand",
                "expand_as", "get", "pop", "setdefault", "copy", "__getitem__"}
_KEY_CALLS = {"data_ptr", "untyped_storage", "storage", "storage_offset", "numel", "size", "stride", "dim",
              "_typed_storage", "nbytes"}
_KEY_ATTRS = {"shape", "_version", "_cdata", "data_ptr", "ndim"}
_TORCH_METHODS = {
    "matmul", "mm", "bmm", "addmm", "baddbmm", "mv", "conv1d", "conv2d", "conv3d", "linear", "softmax",
    "log_softmax", "sum", "mean", "relu", "gelu", "sigmoid", "tanh", "exp", "layer_norm", "einsum",
    "forward", "__matmul__",
}
_BUILD_CALLS = ("load_inline", "cpp_extension.load", "triton.compile")


# ---- embedded CUDA / C++ ------------------------------------------------------------------------

def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.MULTILINE)


_CPP_LIKE = _rx(r"#include|__global__|__device__|::|<<<|;|\bPYBIND11_MODULE\b|\bTORCH_LIBRARY|\basm\b"
                r"|\bcuda[A-Z]\w*\s*\(|\bcu[A-Z]\w*\s*\(|\bpthread_\w+\s*\(")

_CPP_RULES: list[tuple[Flag, re.Pattern[str], str]] = [
    (Flag.SIDE_STREAM,
     _rx(r"\bcudaStreamCreate\w*|\bcuStreamCreate\w*|\bgetStreamFromPool\b|\bgetStreamFromExternal\b"
         r"|\bcudaStreamNonBlocking\b|\bcudaStreamPerThread\b|\bsetCurrentCUDAStream\b"),
     "CUDA source uses a stream other than PyTorch's current one ({m})"),
    (Flag.BACKGROUND_THREAD, _rx(r"\bstd::(?:thread|jthread|async)\b|\bpthread_create\b|\bboost::thread\b"),
     "CUDA/C++ source starts a thread ({m})"),
    (Flag.GLOBAL_STATE,
     _rx(r"\bglobalContext\s*\(\s*\)\s*\.\s*set\w+|\bcudaDeviceReset\b|\bcudaSetDeviceFlags\b"
         r"|\bcublasSetMathMode\s*\(\s*(?:at::cuda::)?getCurrentCUDABlasHandle"),
     "CUDA/C++ source changes process-wide state ({m})"),
    (Flag.MONKEY_PATCH,
     _rx(r"\bTORCH_LIBRARY(?:_IMPL|_FRAGMENT)?\s*\(\s*(?:aten|prim|prims)\b|\bdlsym\s*\(|\bLD_PRELOAD\b"
         r"|\b(?:cudaError_t|CUresult)\s+(?:cudaEventElapsedTime|cudaEventRecord|cudaEventSynchronize"
         r"|cudaStreamSynchronize|cudaDeviceSynchronize|cuEventElapsedTime)\s*\("),
     "CUDA/C++ source overrides PyTorch operators or CUDA runtime functions ({m})"),
    (Flag.PROBLEM_EDIT,
     _rx(r"\bcudaIpcOpenMemHandle\b|\bcuIpcOpenMemHandle\b|\bcudaIpcGetMemHandle\b|\bfopen\s*\("
         r"|\bstd::[io]?fstream\b|\bgetenv\s*\(|/proc/|/dev/shm|\bshm_open\b|\bmmap\s*\("),
     "CUDA/C++ source reaches outside its inputs (files, environment or other processes' memory: {m})"),
    (Flag.REFERENCE_FALLBACK, _rx(r"\bcatch\s*\([^)]*\)\s*\{[^{}]*?\breturn\b[^;{}]*\b(?:at|torch)::\w+"),
     "CUDA/C++ source catches an error and returns a PyTorch result instead"),
]
_CPP_TF32 = _rx(r"\bCUBLAS_TF32_TENSOR_OP_MATH\b|\bCUBLAS_COMPUTE_32F_FAST_\w+|\bprecision::tf32\b|__float_to_tf32"
                r"|\bsetAllowTF32\w*|\bsetFloat32MatmulPrecision\b|\.tf32\b|\bCUBLAS_COMPUTE_16F\b")
_CPP_HALF = _rx(r"\b__half2?\b|\bhalf2\b|\b__nv_bfloat162?\b|\b__float2half\w*|\b__float2bfloat16\w*"
                r"|\b__floats2(?:half2|bfloat162)\w*|\b(?:at|c10)::(?:Half|BFloat16)\b|\bk(?:Half|Float16|BFloat16)\b"
                r"|\.f16(?:x2)?\b|\.bf16(?:x2)?\b|\.half\s*\(\s*\)|\bwmma::fragment\s*<[^>]*\bhalf\b")
_CPP_FP8 = _rx(r"\b__nv_fp8\w*|\bkFloat8\w*|\.e4m3\b|\.e5m2\b|\bCUBLAS_COMPUTE_16F\b")
_CPP_STATIC_HOLD = _rx(r"\bstatic\s+(?:thread_local\s+)?(?:const\s+)?(?:(?:torch|at)::Tensor\b|(?:void|float|double|half"
                       r"|int|\w+_t|scalar_t)\s*(?:const\s*)?\*)")
_CPP_STATIC_MAP = _rx(r"\bstatic\s+(?:thread_local\s+)?(?:std::)?(?:unordered_)?map\s*<[^;]*\b(?:torch|at)::Tensor")
_CPP_PTR_COMPARE = _rx(r"data_ptr\s*(?:<[^>]*>)?\s*\(\s*\)\s*[!=]=|[!=]=\s*[\w.>\-]*data_ptr")


# ---- the fallback analysis's values ---------------------------------------------------------------

_Key = tuple[str, str]  # ("name", id) or ("attr", attribute of self / cls / an own class)


class _Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


_UNKNOWN = _Marker("unknown")
_TRUTHY = _Marker("truthy")  # only the truth of the value is known
_FALSY = _Marker("falsy")
_MARKERS = (_UNKNOWN, _TRUTHY, _FALSY)


@dataclass
class _Site:
    """One place a kernel is built, with what its keys hold when the build failed; not frozen, as
    its fallback lines are collected as the branches that use its keys are found."""
    node: ast.AST
    reason: str
    lines: list[tuple[int, int]]
    keys: dict[_Key, tuple[object, frozenset[int]]]
    report_empty: bool  # reported even without a fallback line found (a caught build always is)


def _truth(value: object) -> bool | None:
    if value is _TRUTHY:
        return True
    if value is _FALSY:
        return False
    if value is _UNKNOWN:
        return None
    try:
        return bool(value)
    except Exception:
        return None


def _agree(values: list[object]) -> object:
    """The value all of ``values`` share, else their shared truth (_TRUTHY/_FALSY), else _UNKNOWN."""
    if not values or any(v is _UNKNOWN for v in values):
        return _UNKNOWN
    first = values[0]
    if all(type(v) is type(first) and (v is first or (first not in _MARKERS and v == first)) for v in values):
        return first
    truths = {_truth(v) for v in values}
    if truths == {True}:
        return _TRUTHY
    if truths == {False}:
        return _FALSY
    return _UNKNOWN


def _span(stmts: list[ast.stmt]) -> tuple[int, int]:
    first = min([stmts[0].lineno] + [d.lineno for d in getattr(stmts[0], "decorator_list", [])])
    return first, max(getattr(s, "end_lineno", None) or s.lineno for s in stmts)


def _runs(lines: list[int]) -> list[tuple[int, int]]:
    """Sorted line numbers as inclusive ranges of consecutive lines."""
    runs: list[tuple[int, int]] = []
    for line in lines:
        if runs and line == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], line)
        else:
            runs.append((line, line))
    return runs


def _terminates(stmts: list[ast.stmt]) -> bool:
    """Whether a block always leaves through return or raise (so what follows it is its else)."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    return isinstance(last, ast.If) and _terminates(last.body) and _terminates(last.orelse)


_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
             ast.AsyncFunctionDef, ast.ClassDef) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ()) + (
             (ast.Match,) if hasattr(ast, "Match") else ())
_LAZY = (ast.IfExp, ast.BoolOp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _unconditional(stmt: ast.stmt) -> Iterator[ast.AST]:
    """Nodes of a simple statement that are evaluated whenever it runs (not those inside a
    conditional expression, a short-circuit operator, a lambda or a comprehension)."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _LAZY):
            continue
        stack.extend(ast.iter_child_nodes(node))


# ---- the scanner --------------------------------------------------------------------------------

def _weight(finding: Finding) -> int:
    return 2 if finding.decisive else 1 if finding.conditional else 0


def _norm_dtype(name: str) -> str:
    text = str(name or "float32").strip().lower().replace("torch.", "")
    return _DTYPE_NAMES.get(text, "float32" if text not in _RANK else text)


def _const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _is_const(node: ast.AST | None) -> bool:
    if node is None or isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_is_const(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        return _is_const(node.operand)
    return False


def _kw(call: ast.Call, name: str) -> ast.AST | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return None


def _walk_local(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk that does not enter nested functions, lambdas or classes (the node itself excepted)."""
    stack = [node]
    first = True
    while stack:
        current = stack.pop()
        yield current
        if not first and isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        first = False
        stack.extend(reversed(list(ast.iter_child_nodes(current))))


def _walk_body(stmts: Iterable[ast.stmt]) -> Iterator[ast.AST]:
    for stmt in stmts:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield from _walk_local(stmt)


_COMPOUND_HEADERS = {
    ast.If: ("test",), ast.While: ("test",), ast.For: ("target", "iter"), ast.AsyncFor: ("target", "iter"),
    ast.With: ("items",), ast.AsyncWith: ("items",), ast.Try: (),
}


def _statements(stmts: Iterable[ast.stmt]) -> Iterator[tuple[ast.stmt, list[ast.AST]]]:
    """Statements in source order (into blocks, not into nested defs), each with the expression
    nodes that belong to it alone (a compound statement's header, a simple statement's all)."""
    for stmt in stmts:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        headers = None
        for kind, fields in _COMPOUND_HEADERS.items():
            if isinstance(stmt, kind):
                headers = fields
                break
        if headers is None and hasattr(ast, "TryStar") and isinstance(stmt, ast.TryStar):
            headers = ()
        if headers is None:
            yield stmt, list(_walk_local(stmt))
            continue
        nodes: list[ast.AST] = []
        for name in headers:
            value = getattr(stmt, name)
            for item in value if isinstance(value, list) else [value]:
                nodes.extend(_walk_local(item))
        yield stmt, nodes
        for block in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(stmt, block, []) or [])
        for handler in getattr(stmt, "handlers", []) or []:
            yield from _statements(handler.body)


class _Scanner:
    def __init__(self, tree: ast.Module, problem_dtype: str, line_offset: int = 0, depth: int = 0):
        self.tree = tree
        self.dtype = _norm_dtype(problem_dtype)
        self.raw_dtype = problem_dtype
        self.offset = line_offset
        self.depth = depth
        self.found: dict[tuple[str, int], Finding] = {}
        self.aliases: dict[str, str] = {}
        self.module_roots: set[str] = {"__builtins__"}
        self.parents: dict[ast.AST, ast.AST] = {}
        self.bound: set[str] = set()
        self.module_vars: set[str] = set()
        self.class_names: set[str] = set()
        self.functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        self.side_streams: list[tuple[ast.AST, str]] = []

    # ---- bookkeeping ---------------------------------------------------------------------------
    def add(self, flag: Flag, where: ast.AST | int, reason: str, *, conditional: bool = False,
            fallback_lines: Iterable[tuple[int, int]] = (), note: bool = False) -> None:
        line = where if isinstance(where, int) else getattr(where, "lineno", 0)
        line += self.offset
        key = (flag.value, line)
        finding = Finding(flag.value, line, reason, conditional, tuple(sorted(set(fallback_lines))), note)
        if key not in self.found or _weight(finding) > _weight(self.found[key]):
            self.found[key] = finding  # on one line, a flag outranks a conditional, which outranks a note

    def results(self) -> list[Finding]:
        return sorted(self.found.values(), key=lambda f: (f.line, f.flag))

    @property
    def wide(self) -> bool:
        """The problem computes in fp32 or fp64, where fp16/bf16/TF32 are downcasts."""
        return self.dtype in ("float32", "float64")

    def lower(self, dtype: str | None) -> bool:
        return dtype is not None and _RANK.get(dtype, 9) < _RANK.get(self.dtype, 3)

    # ---- name resolution -----------------------------------------------------------------------
    def qual(self, node: ast.AST | None) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.qual(node.value)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Call):
            func = self.qual(node.func)
            if func in ("importlib.import_module", "__import__") and node.args:
                return _const_str(node.args[0])
            if func == "getattr" and len(node.args) >= 2 and _const_str(node.args[1]):
                base = self.qual(node.args[0])
                return None if base is None else f"{base}.{_const_str(node.args[1])}"
            return None
        if isinstance(node, ast.Subscript) and self.qual(node.value) == "sys.modules":
            return _const_str(node.slice)
        return None

    def rooted(self, qual: str | None) -> bool:
        return bool(qual) and qual.split(".")[0] in self.module_roots

    def builtin(self, node: ast.AST, name: str) -> bool:
        return isinstance(node, ast.Name) and node.id == name and name not in self.bound

    def dtype_of(self, node: ast.AST | None) -> str | None:
        qual = self.qual(node) if node is not None else None
        if not qual:
            return None
        if qual in _DTYPE_OF_QUAL:
            return _DTYPE_OF_QUAL[qual]
        if qual.startswith(("torch.float8_", "triton.language.float8")):
            return "float8"
        return None

    # ---- passes --------------------------------------------------------------------------------
    def run(self) -> None:
        self._prepare()
        for node in ast.walk(self.tree):
            self._visit(node)
        if not self._graph_capture_idiom():
            for node, reason in self.side_streams:
                self.add(Flag.SIDE_STREAM, node, reason)
        self._fallbacks()
        self._function_analyses()
        self._strings()

    def _prepare(self) -> None:
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                        self.module_roots.add(alias.name.split(".")[0])
                    else:
                        root = alias.name.split(".")[0]
                        self.aliases[root] = root
                        self.module_roots.add(root)
            elif isinstance(node, ast.ImportFrom):
                module = "." * (node.level or 0) + (node.module or "")
                self.module_roots.add(module.split(".")[0] if module and not node.level else module or ".")
                for alias in node.names:
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.bound.add(node.name)
                self.functions.setdefault(node.name, []).append(node)
                args = node.args
                for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                    if a is not None:
                        self.bound.add(a.arg)
            elif isinstance(node, ast.ClassDef):
                self.bound.add(node.name)
            elif isinstance(node, ast.Call) and node.args and _const_str(node.args[0]) and (
                    (isinstance(node.func, ast.Name) and node.func.id == "__import__")
                    or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")):
                self.module_roots.add(_const_str(node.args[0]).split(".")[0])  # modules imported by name
            elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                self.bound.add(node.id)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
        for stmt in self.tree.body:
            if isinstance(stmt, ast.ClassDef):
                self.class_names.add(stmt.name)
            for target in self._assigned_names(stmt):
                self.module_vars.add(target)
        # Simple aliases of modules and their attributes (t = torch; Event = torch.cuda.Event).
        for _ in range(2):
            for node in ast.walk(self.tree):
                if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                        and isinstance(node.value, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))):
                    qual = self.qual(node.value)  # calls resolve only for import_module / getattr
                    if qual and self.rooted(qual):
                        self.aliases[node.targets[0].id] = qual

    def _graph_capture_idiom(self) -> bool:
        """CUDA graph capture needs a warm-up on a side stream (PyTorch's documented recipe); it is
        honest when that stream is joined back into the current one before anything is timed."""
        captures = joins = False
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Attribute, ast.Name)):
                if (self.qual(node) or "") in ("torch.cuda.CUDAGraph", "torch.cuda.graph",
                                                "torch.cuda.graphs.CUDAGraph", "torch.cuda.make_graphed_callables"):
                    captures = True
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "wait_stream":
                receiver = node.func.value
                if isinstance(receiver, ast.Call) and (self.qual(receiver.func) or "") in (
                        "torch.cuda.current_stream", "torch.cuda.default_stream"):
                    joins = True
        return captures and joins

    @staticmethod
    def _assigned_names(stmt: ast.stmt) -> list[str]:
        names: list[str] = []
        targets: list[ast.AST] = []
        if isinstance(stmt, ast.Assign):
            targets = list(stmt.targets)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets = [stmt.target]
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    names.append(node.id)
        return names

    # ---- per-node rules ------------------------------------------------------------------------
    def _visit(self, node: ast.AST) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self._imports(node)
        elif isinstance(node, ast.Attribute):
            if isinstance(node.ctx, ast.Load):
                self._reference(node, self.qual(node))
            self._attribute_name(node)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                if node.id in self.aliases:
                    self._reference(node, self.aliases[node.id])
                elif node.id in _PROBLEM_NAMES and node.id not in self.bound:
                    self.add(Flag.PROBLEM_EDIT, node, f"uses {node.id} without defining it (the problem's namespace)")
                elif node.id == "__builtins__":
                    self._builtins_use(node)
            elif isinstance(node.ctx, ast.Store) and node.id in ("__torch_function__", "__torch_dispatch__"):
                self.add(Flag.TENSOR_SUBCLASS, node, f"defines {node.id}")
        elif isinstance(node, ast.Call):
            self._call(node)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            self._store(node)
        elif isinstance(node, ast.ClassDef):
            self._class(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name in ("__torch_function__", "__torch_dispatch__"):
                self.add(Flag.TENSOR_SUBCLASS, node, f"defines {node.name}: a tensor that runs code when used")
        elif isinstance(node, ast.keyword):
            self._keyword(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            self._problem_string(node)

    def _imports(self, node: ast.Import | ast.ImportFrom) -> None:
        fulls: list[str] = []
        if isinstance(node, ast.Import):
            fulls = [a.name for a in node.names]
        else:
            module = "." * (node.level or 0) + (node.module or "")
            fulls = [module] if module else []
            for alias in node.names:
                if alias.name in _PROBLEM_NAMES:
                    self.add(Flag.PROBLEM_EDIT, node, f"imports {alias.name} from {module or '.'}")
                if alias.name != "*":
                    fulls.append(f"{module}.{alias.name}")
        for full in fulls:
            self._reference(node, full)

    def _reference(self, node: ast.AST, qual: str | None) -> None:
        if not qual:
            return
        root = qual.split(".")[0]
        if qual in _SIDE_STREAM_NAMES:
            self.side_streams.append((node, f"uses {qual}: work on a stream other than the timed one"))
        if root in _THREAD_ROOTS or qual in _THREAD_NAMES or qual.startswith("torch.multiprocessing"):
            self.add(Flag.BACKGROUND_THREAD, node, f"uses {qual} (threads or processes)")
        if qual == "sys.modules" or qual.startswith("sys.modules."):
            self.add(Flag.PROBLEM_EDIT, node, "reads sys.modules (other modules, the problem's included)")
        if root in _PROBLEM_ROOTS or qual in _PROBLEM_REFS:
            self.add(Flag.PROBLEM_EDIT, node, f"uses {qual}: reaches outside its inputs for the problem")
        if qual in ("os.environ", "os.environb") and isinstance(node, (ast.Name, ast.Attribute)):
            self._environ(node)
        if qual in _AUTOCAST_NAMES and not self._is_called(node) and self.wide:
            self.add(Flag.PRECISION_DOWNCAST, node, f"{qual}: autocast computes in fp16/bf16")
        if qual.endswith(_MODE_BASES) and root == "torch":
            self.add(Flag.MONKEY_PATCH, node, f"uses {qual}: intercepts every torch call")
        if self.rooted(qual) and qual.split(".")[-1] in _PROBLEM_NAMES and root not in ("torch", "triton"):
            self.add(Flag.PROBLEM_EDIT, node, f"reaches for {qual}")

    def _is_called(self, node: ast.AST) -> bool:
        parent = self.parents.get(node)
        return isinstance(parent, ast.Call) and parent.func is node

    def _attribute_name(self, node: ast.Attribute) -> None:
        if node.attr in ("_make_subclass", "_make_wrapper_subclass", "as_subclass"):
            self.add(Flag.TENSOR_SUBCLASS, node, f"uses {node.attr}: builds a tensor subclass")
        elif node.attr in _FRAME_ATTRS:
            self.add(Flag.PROBLEM_EDIT, node, f"uses .{node.attr}: walks frames, globals or classes of other code")
        elif node.attr == "__class__" and isinstance(node.ctx, ast.Store):
            self.add(Flag.TENSOR_SUBCLASS, node, "assigns __class__: changes the type of an object")

    def _builtins_use(self, node: ast.Name) -> None:
        parent = self.parents.get(node)
        if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, (ast.Store, ast.Del)):
            self.add(Flag.MONKEY_PATCH, node, "writes into __builtins__")

    def _problem_string(self, node: ast.Constant) -> None:
        if node.value not in _PROBLEM_STRINGS:
            return
        parent = self.parents.get(node)
        if isinstance(parent, ast.Compare) and any(
                isinstance(n, ast.Name) and n.id == "__name__" for n in [parent.left, *parent.comparators]):
            return  # if __name__ == "__main__":
        self.add(Flag.PROBLEM_EDIT, node, f"looks up {node.value!r} (the problem's names or module)")

    def _class(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            qual = self.qual(base) or ""
            if qual in _SUBCLASS_BASES or (isinstance(base, ast.Name) and base.id in self._tensor_classes()):
                self.add(Flag.TENSOR_SUBCLASS, node, f"class {node.name} derives from {qual or 'a tensor class'}")
            if qual.endswith(_MODE_BASES):
                self.add(Flag.MONKEY_PATCH, node, f"class {node.name} is a {qual.split('.')[-1]}: intercepts torch calls")

    def _tensor_classes(self) -> set[str]:
        cached = getattr(self, "_tensor_class_cache", None)
        if cached is not None:
            return cached
        names: set[str] = set()
        classes = [n for n in ast.walk(self.tree) if isinstance(n, ast.ClassDef)]
        changed = True
        while changed:
            changed = False
            for cls in classes:
                if cls.name in names:
                    continue
                for base in cls.bases:
                    if (self.qual(base) or "") in _SUBCLASS_BASES or (isinstance(base, ast.Name) and base.id in names):
                        names.add(cls.name)
                        changed = True
                        break
        self._tensor_class_cache = names
        return names

    # ---- calls ---------------------------------------------------------------------------------
    def _call(self, node: ast.Call) -> None:
        func = self.qual(node.func) or ""
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else None
        last = func.split(".")[-1]

        # global settings
        if func in _NEUTRAL_CALLS:
            self.add(Flag.GLOBAL_STATE, node, f"calls {func}: a process-local setting that leaves the arithmetic alone",
                     note=True)
        elif func.startswith("torch.") and func not in _GLOBAL_CALL_EXEMPT and func not in _SIDE_STREAM_NAMES and (
                func in _GLOBAL_CALLS or last.startswith(("set_", "_set_", "_jit_set_"))
                or (func.startswith("torch.backends.") and last.startswith(("enable_", "allow_", "preferred_")))):
            self.add(Flag.GLOBAL_STATE, node, f"calls {func}: changes a process-wide setting")
        elif func in _GLOBAL_CALLS:
            self.add(Flag.GLOBAL_STATE, node, f"calls {func}: changes a process-wide setting")
        if func == "torch.set_float32_matmul_precision":
            value = _const_str(node.args[0] if node.args else _kw(node, "precision"))
            if value in ("high", "medium") and self.wide:
                self.add(Flag.PRECISION_DOWNCAST, node, f"set_float32_matmul_precision({value!r}) allows TF32/bf16")
        if func.startswith("torch.") and "autocast" in last and last.startswith("set_") and self.wide:
            self.add(Flag.PRECISION_DOWNCAST, node, f"calls {func}")

        # precision
        if func in _AUTOCAST_NAMES:
            self._autocast(node, func)
        if self.wide or self.dtype in ("float16", "bfloat16"):
            self._dtype_args(node, func, attr)
        if func == "triton.language.dot" and self.dtype == "float32":
            self._tl_dot(node)
        elif func == "triton.language.dot_scaled" and self.wide:
            self.add(Flag.PRECISION_DOWNCAST, node, "tl.dot_scaled multiplies in low precision")

        # monkey-patching through setattr and friends
        if (self.builtin(node.func, "setattr") or self.builtin(node.func, "delattr")
                or func in ("object.__setattr__", "object.__delattr__", "type.__setattr__", "builtins.setattr")):
            if node.args:
                base = self.qual(node.args[0])
                name = _const_str(node.args[1]) if len(node.args) > 1 else None
                if self.rooted(base):
                    self._attribute_write(f"{base}.{name or '<dynamic>'}", node.args[2] if len(node.args) > 2 else None,
                                          node, name or "")
                elif isinstance(node.args[0], ast.Name) and node.args[0].id == "__builtins__":
                    self.add(Flag.MONKEY_PATCH, node, "sets an attribute of __builtins__")
        if attr in ("update", "__setitem__", "setdefault", "pop", "__delitem__", "clear", "popitem") and \
                self._protected_mapping(node.func.value):
            self.add(Flag.MONKEY_PATCH, node, "rewrites the namespace of a module or of the builtins")
        if func in _MONKEY_CALLS:
            self.add(Flag.MONKEY_PATCH, node, f"calls {func}: hooks into the interpreter")
        if func.startswith("torch.nn.modules.module.register_module_"):
            self.add(Flag.MONKEY_PATCH, node, f"calls {func}: a hook on every module")
        if func.startswith("torch.library.") and node.args:
            namespace = (_const_str(node.args[0]) or "").split("::")[0]
            if namespace in ("aten", "prim", "prims"):
                self.add(Flag.MONKEY_PATCH, node, f"{func}({namespace!r}) overrides PyTorch's own operators")

        # problem / environment / files
        if self.builtin(node.func, "open"):
            self.add(Flag.PROBLEM_EDIT, node, "opens a file")
        if attr in _FILE_METHODS and not func.startswith("triton"):
            self.add(Flag.PROBLEM_EDIT, node, f"calls .{attr}(): reads files or folders")
        if func in ("os.getenv", "os.getenvb"):
            self._env_access(node, node.args[0] if node.args else None, write=False)
        elif func in ("os.putenv", "os.unsetenv"):
            self._env_access(node, node.args[0] if node.args else None, write=True,
                             value=node.args[1] if len(node.args) > 1 else None)

        # tensor subclasses made with type(name, bases, namespace)
        if self.builtin(node.func, "type") and len(node.args) == 3 and isinstance(node.args[1], (ast.Tuple, ast.List)):
            if any((self.qual(b) or "") in _SUBCLASS_BASES for b in node.args[1].elts):
                self.add(Flag.TENSOR_SUBCLASS, node, "type(...) builds a torch.Tensor subclass")

        # code hidden in strings: scan it too
        if (self.builtin(node.func, "exec") or self.builtin(node.func, "eval") or self.builtin(node.func, "compile")) \
                and node.args and _const_str(node.args[0]) and self.depth < 3:
            self._nested(_const_str(node.args[0]), node)

    def _nested(self, source: str, call: ast.Call) -> None:
        """Python source run by exec/eval/compile: scanned too, its findings reported at the call."""
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return
        inner = _Scanner(tree, self.raw_dtype, 0, self.depth + 1)
        try:
            inner.run()
        except (Exception, RecursionError):
            pass
        for finding in inner.results():
            # Lines of exec'd source belong to "<string>", not to the candidate's file, so a tracer
            # of that file never sees them run: a fallback hidden there is a flag outright.
            self.add(Flag(finding.flag), call, f"in exec'd source: {finding.reason}", note=finding.note)

    def _autocast(self, node: ast.Call, func: str) -> None:
        enabled = _kw(node, "enabled")
        if isinstance(enabled, ast.Constant) and enabled.value is False:
            return
        dtype_node = _kw(node, "dtype")
        if dtype_node is None and func in ("torch.autocast", "torch.amp.autocast") and len(node.args) > 1:
            dtype_node = node.args[1]
        dtype = self.dtype_of(dtype_node)
        if self.wide and (dtype is None or self.lower(dtype)):
            self.add(Flag.PRECISION_DOWNCAST, node, f"{func}: autocast computes in fp16/bf16 in a {self.dtype} problem")
        elif dtype is not None and dtype != self.dtype and self.lower(dtype) is False and dtype in ("float16", "bfloat16") \
                and self.dtype in ("float16", "bfloat16"):
            self.add(Flag.PRECISION_DOWNCAST, node, f"{func}: autocast to {dtype} in a {self.dtype} problem")

    def _dtype_args(self, node: ast.Call, func: str, attr: str | None) -> None:
        if func in ("torch.finfo", "torch.iinfo", "isinstance"):
            return
        if attr in ("half", "bfloat16") and not node.args and self.wide:
            self.add(Flag.PRECISION_DOWNCAST, node, f".{attr}() in a {self.dtype} problem")
            return
        if attr == "float" and not node.args and self.dtype == "float64":
            self.add(Flag.PRECISION_DOWNCAST, node, ".float() in a float64 problem")
            return
        for arg in list(node.args) + [k.value for k in node.keywords]:
            dtype = self.dtype_of(arg)
            if self.lower(dtype):
                self.add(Flag.PRECISION_DOWNCAST, node, f"computes in {dtype} in a {self.dtype} problem")
                return

    def _tl_dot(self, node: ast.Call) -> None:
        precision = _kw(node, "input_precision")
        if precision is None and len(node.args) > 3:
            precision = node.args[3]
        allow = _kw(node, "allow_tf32")
        if allow is None and len(node.args) > 4:
            allow = node.args[4]
        if isinstance(allow, ast.Constant) and allow.value is True:
            return  # reported by the keyword rule
        if _const_str(precision) in ("ieee", "tf32x3"):
            return
        if isinstance(allow, ast.Constant) and allow.value is False and precision is None:
            return
        if precision is not None and not isinstance(precision, ast.Constant):
            return  # decided by a constexpr; its value is checked where it is passed
        self.add(Flag.PRECISION_DOWNCAST, node,
                 "tl.dot without input_precision=\"ieee\" multiplies fp32 in TF32")

    def _keyword(self, node: ast.keyword) -> None:
        value = node.value
        if node.arg in _TF32_ATTRS and not (isinstance(value, ast.Constant) and not value.value):
            self.add(Flag.PRECISION_DOWNCAST, node if hasattr(node, "lineno") else value, f"{node.arg}=... enables TF32")
        elif self.dtype == "float32" and _const_str(value) == "tf32":
            self.add(Flag.PRECISION_DOWNCAST, value, f"{node.arg}=\"tf32\" in a float32 problem")

    # ---- stores --------------------------------------------------------------------------------
    def _store(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets, value = [node.target], node.value
        else:
            targets, value = node.targets, None
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Attribute) and not isinstance(sub.ctx, ast.Load):
                    base = self.qual(sub.value)
                    if self.rooted(base):
                        self._attribute_write(f"{base}.{sub.attr}", value if sub is target else None, sub, sub.attr)
                elif isinstance(sub, ast.Subscript) and not isinstance(sub.ctx, ast.Load):
                    container = self.qual(sub.value)
                    if container in ("os.environ", "os.environb"):
                        continue  # handled with the other environment accesses
                    if container == "sys.modules":
                        self.add(Flag.PROBLEM_EDIT, sub, "writes into sys.modules")
                    elif self._protected_mapping(sub.value):
                        self.add(Flag.MONKEY_PATCH, sub, "writes into the namespace of a module or of the builtins")
        if value is not None and self.wide and isinstance(node, (ast.Assign, ast.AnnAssign)):
            dtype = self.dtype_of(value)
            if self.lower(dtype):
                self.add(Flag.PRECISION_DOWNCAST, node, f"selects {dtype} in a {self.dtype} problem")

    def _protected_mapping(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name) and node.id == "__builtins__":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return self.rooted(self.qual(node.value))
        if isinstance(node, ast.Call) and self.builtin(node.func, "vars") and node.args:
            return self.rooted(self.qual(node.args[0]))
        return False

    def _attribute_write(self, full: str, value: ast.AST | None, node: ast.AST, attr: str) -> None:
        root = full.split(".")[0]
        if full.startswith("sys.modules"):
            self.add(Flag.PROBLEM_EDIT, node, f"writes {full}")
            return
        if full in _NEUTRAL_ATTRS:
            self.add(Flag.GLOBAL_STATE, node, f"sets {full}: a process-local setting that leaves the arithmetic alone",
                     note=True)
            return
        if full.startswith("torch.backends.") or (root in ("torch", "triton") and (
                ".config." in full or full.startswith("triton.knobs."))) or full.startswith("torch._C._"):
            self.add(Flag.GLOBAL_STATE, node, f"sets {full}: a process-wide setting")
            if attr in _TF32_ATTRS and not (isinstance(value, ast.Constant) and not value.value):
                self.add(Flag.PRECISION_DOWNCAST, node, f"sets {full}: TF32 / reduced-precision math")
            if attr == "fp32_precision" and _const_str(value) in ("tf32", "bf16"):
                self.add(Flag.PRECISION_DOWNCAST, node, f"sets {full} = {_const_str(value)!r}")
            return
        if full in ("os.environ", "os.environb"):
            self.add(Flag.GLOBAL_STATE, node, "replaces os.environ")
            return
        self.add(Flag.MONKEY_PATCH, node, f"replaces {full}")

    # ---- environment ---------------------------------------------------------------------------
    def _environ(self, node: ast.AST) -> None:
        parent = self.parents.get(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            write = isinstance(parent.ctx, (ast.Store, ast.Del))
            value = None
            holder = self.parents.get(parent)
            if write and isinstance(holder, ast.Assign):
                value = holder.value
            self._env_access(parent, parent.slice, write=write, value=value)
            return
        if isinstance(parent, ast.Attribute) and parent.value is node:
            call = self.parents.get(parent)
            method = parent.attr
            args = call.args if isinstance(call, ast.Call) and call.func is parent else []
            if method in ("get", "__getitem__", "__contains__"):
                self._env_access(parent, args[0] if args else None, write=False)
                return
            if method in ("setdefault", "__setitem__", "pop", "__delitem__", "unsetenv"):
                self._env_access(parent, args[0] if args else None, write=True, value=args[1] if len(args) > 1 else None)
                return
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
                for key, value in zip(keys, values) or [(None, None)]:
                    self._env_access(parent, key, write=True, value=value)
                return
            self._env_access(parent, None, write=False)
            return
        if isinstance(parent, ast.Compare) and node in parent.comparators and any(
                isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops):
            self._env_access(parent, parent.left, write=False)
            return
        self._env_access(node, None, write=False)

    def _env_access(self, node: ast.AST, key_node: ast.AST | None, write: bool, value: ast.AST | None = None) -> None:
        key = _const_str(key_node)
        if not write:
            if key in _ENV_READ:
                return
            what = f"environment variable {key}" if key else "the environment"
            self.add(Flag.PROBLEM_EDIT, node, f"reads {what}")
            return
        if key in _ENV_BUILD:
            return
        self.add(Flag.GLOBAL_STATE, node, f"sets environment variable {key or '<dynamic>'}")
        upper = (key or "").upper()
        if "TF32" in upper or (upper == "TRITON_F32_DEFAULT" and _const_str(value) not in ("ieee", "tf32x3")):
            if self.wide:
                self.add(Flag.PRECISION_DOWNCAST, node, f"sets {key}: TF32 math")

    # ---- try / except and fallbacks ------------------------------------------------------------
    # A fallback is honest while the kernel works, so most are reported as conditional findings
    # that carry the lines of the fallback; what decides is whether those lines run. Three shapes:
    # a kernel build caught by try/except; a branch taken when the built module is missing (None,
    # False, a flag the handler set); an except handler on the forward path that computes the result
    # another way. Only lines that run when the fallback is taken are listed: a try at import or in
    # __init__ that builds nothing (a device probe) replaces no kernel and is no finding. Kept as
    # flags outright: a handler that runs on every call (its try body uses a module that is only
    # ever None), and fallbacks in exec'd source or in C++ (no line of the file to trace).

    def _fallbacks(self) -> None:
        builders = self._builder_functions()
        bindings = self._bindings()
        sites: list[_Site] = []
        state: dict[_Key, tuple[object, frozenset[int]]] = {}
        in_build_tries: set[ast.AST] = set()
        none_only = self._none_only_keys(bindings)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Try) or (hasattr(ast, "TryStar") and isinstance(node, ast.TryStar)):
                site = self._try(node, builders, none_only, len(sites))
                if site is not None:
                    sites.append(site)
                    state.update(site.keys)
                    in_build_tries.update(_walk_body(node.body))
        for node in ast.walk(self.tree):
            # A kernel built outside try/except, where the module may also be a constant (built only
            # on some paths): its missing-module branches are fallbacks as well.
            if isinstance(node, ast.Assign) and node not in in_build_tries and self._has_build(node.value, builders):
                keys = {}
                for target in node.targets:
                    key = self._key(target)
                    value = self._agreed_constant(bindings.get(key, []), skip=node.value) if key else _UNKNOWN
                    if key and key not in state and value is not _UNKNOWN:
                        keys[key] = (value, frozenset({len(sites)}))
                if keys:
                    sites.append(_Site(node, "a kernel that is built only on some paths", [], keys, report_empty=False))
                    state.update(keys)
        if not sites:
            return
        self._propagate(state, bindings)
        for block in self._blocks():
            for index, stmt in enumerate(block):
                if isinstance(stmt, ast.If):
                    self._missing_module_branch(stmt, block[index + 1:], state, builders, sites)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.IfExp):
                self._missing_module_expression(node, state, builders, sites)
        for site in sites:
            if site.lines or site.report_empty:
                self.add(Flag.REFERENCE_FALLBACK, site.node, f"{site.reason}: a flag if its fallback runs",
                         conditional=True, fallback_lines=site.lines)

    def _try(self, node: ast.Try, builders: set[str], none_only: set[_Key], index: int) -> _Site | None:
        if not node.handlers:
            return None
        body_nodes = list(_walk_body(node.body))
        if not any(isinstance(n, ast.Call) for n in body_nodes):
            return None
        if any(self._has_build(n, builders) for n in body_nodes if isinstance(n, ast.Call)):
            # Even when only ImportError is caught: a built module that fails to load raises it.
            return self._build_try(node, builders, index)
        has_import = any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in body_nodes)
        if has_import and all(self._import_error_only(h) for h in node.handlers):
            return None
        fn = self._enclosing_function(node)
        always = self._always_raises(node.body, none_only)
        for handler in node.handlers:
            if self._reraises(handler):
                continue
            if fn is None or fn not in self._forward_reachable():
                continue  # set-up at import or construction (a device probe, say): no kernel to replace
            if self._computes(handler.body):
                if always and self._catches(handler, ("AttributeError", "TypeError")):
                    self.add(Flag.REFERENCE_FALLBACK, handler,
                             f"the try body uses {always}, which is only ever None: the except handler's "
                             "fallback runs on every call")
                else:
                    self.add(Flag.REFERENCE_FALLBACK, handler,
                             "except handler computes the result another way: a flag if it runs",
                             conditional=True, fallback_lines=[_span(handler.body)])
            elif fn is not None and self._is_output_function(fn):
                self.add(Flag.SWALLOWED_EXCEPTION, handler, "exception caught and ignored on the forward path")
        return None

    def _build_try(self, node: ast.Try, builders: set[str], index: int) -> _Site | None:
        """A kernel build caught by try/except: the handler body and, found later, the branches taken
        when the module is missing are the fallback."""
        handlers = [h for h in node.handlers if not self._reraises(h)
                    and not any(self._has_build(n, builders) for n in _walk_body(h.body) if isinstance(n, ast.Call))]
        if not handlers:
            return None  # re-raised, or retried as another build: no fallback to the reference
        failed: dict[_Key, object] = {}
        for handler in handlers:
            for sub in _walk_body(handler.body):
                if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Constant):
                    for target in sub.targets:
                        key = self._key(target)
                        if key:
                            failed[key] = sub.value.value
        bindings = self._bindings()
        for sub in _walk_body(node.body):
            if isinstance(sub, ast.Assign) and self._has_build(sub.value, builders):
                for target in sub.targets:
                    key = self._key(target)
                    if key and key not in failed:
                        # Not reset by the handler: the value it had before the build.
                        failed[key] = self._agreed_constant(bindings.get(key, []), skip=sub.value)
        keys = {k: (v, frozenset({index})) for k, v in failed.items() if v is not _UNKNOWN}
        return _Site(handlers[0], "a failed kernel build is caught", [_span(h.body) for h in handlers], keys,
                     report_empty=True)

    def _missing_module_branch(self, stmt: ast.If, rest: list[ast.stmt], state: dict, builders: set[str],
                               sites: list[_Site]) -> None:
        value, origin = self._eval(stmt.test, state)
        truth = _truth(value)
        if not origin or truth is None:
            return
        if truth:
            branch = stmt.body
        elif stmt.orelse:
            branch = stmt.orelse
        elif _terminates(stmt.body):
            branch = rest  # if <module works>: return <kernel>  /  <fallback>
        else:
            return
        if not branch or self._builds_or_sets(branch, state, builders):
            return  # a lazy build or a state update, not a fallback
        if branch[-1:] and isinstance(branch[-1], ast.Raise) and not any(
                isinstance(n, ast.Return) for n in _walk_body(branch)):
            return  # fails loudly instead of falling back
        for i in origin:
            sites[i].lines.append(_span(branch))

    def _missing_module_expression(self, node: ast.IfExp, state: dict, builders: set[str],
                                   sites: list[_Site]) -> None:
        value, origin = self._eval(node.test, state)
        truth = _truth(value)
        if not origin or truth is None:
            return
        part = node.body if truth else node.orelse
        if self._has_build(part, builders):
            return
        stmt = self.parents.get(node)
        while stmt is not None and not isinstance(stmt, ast.stmt):
            stmt = self.parents.get(stmt)
        inside = set(ast.walk(part))
        own = {n.lineno for n in inside if hasattr(n, "lineno")}
        shared = {n.lineno for n in ast.walk(stmt if stmt is not None else node)
                  if hasattr(n, "lineno") and n not in inside and not isinstance(n, ast.stmt)}
        if stmt is not None:
            shared.add(stmt.lineno)
        # Only the lines nothing else of the statement runs on tell the fallback apart from the kernel.
        for run in _runs(sorted(own - shared)):
            for i in origin:
                sites[i].lines.append(run)

    def _builds_or_sets(self, stmts: list[ast.stmt], state: dict, builders: set[str]) -> bool:
        for sub in _walk_body(stmts):
            if isinstance(sub, ast.Call) and self._has_build(sub, builders):
                return True
            if isinstance(sub, (ast.Name, ast.Attribute)) and isinstance(sub.ctx, ast.Store) \
                    and self._key(sub) in state:
                return True
        return False

    # the missing-module state: what each key holds when the build failed, and which sites it came from
    def _propagate(self, state: dict, bindings: dict) -> None:
        """Keys assigned from the state (use_kernel = ext is not None, ext = load_ext()) join it when
        every binding of the key agrees on the value."""
        primary = set(state)
        for _ in range(4):
            changed = False
            for key, values in bindings.items():
                if key in primary or not values or any(v is None for v in values):
                    continue
                results = [self._eval(v, state) for v in values]
                origin = frozenset().union(*(o for _, o in results))
                agreed = _agree([v for v, _ in results])
                if origin and agreed is not _UNKNOWN and state.get(key) != (agreed, origin):
                    state[key] = (agreed, origin)
                    changed = True
            if not changed:
                return

    def _eval(self, node: ast.AST | None, state: dict, depth: int = 0) -> tuple[object, frozenset[int]]:
        """The value of an expression when the build failed: a constant, _TRUTHY / _FALSY when only
        its truth is known, or _UNKNOWN; with the sites it depends on."""
        none: frozenset[int] = frozenset()
        if node is None or depth > 6:
            return _UNKNOWN, none
        if isinstance(node, ast.Constant):
            return node.value, none
        key = self._key(node)
        if key is not None and key in state:
            return state[key]
        if isinstance(node, ast.NamedExpr):
            return self._eval(node.value, state, depth + 1)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            value, origin = self._eval(node.operand, state, depth + 1)
            truth = _truth(value)
            return (_UNKNOWN if truth is None else not truth), origin
        if isinstance(node, ast.BoolOp):
            return self._eval_boolop(node, state, depth)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, lo = self._eval(node.left, state, depth + 1)
            right, ro = self._eval(node.comparators[0], state, depth + 1)
            origin = lo | ro
            if isinstance(node.ops[0], (ast.Is, ast.IsNot)) and (
                    (left is _TRUTHY and right is None) or (left is None and right is _TRUTHY)):
                return isinstance(node.ops[0], ast.IsNot), origin  # a truthy value is not None
            if any(v in _MARKERS for v in (left, right)):
                return _UNKNOWN, origin
            op = node.ops[0]
            try:
                if isinstance(op, ast.Is):
                    return left is right, origin
                if isinstance(op, ast.IsNot):
                    return left is not right, origin
                if isinstance(op, ast.Eq):
                    return left == right, origin
                if isinstance(op, ast.NotEq):
                    return left != right, origin
            except Exception:
                pass
            return _UNKNOWN, origin
        if isinstance(node, ast.IfExp):
            test, origin = self._eval(node.test, state, depth + 1)
            truth = _truth(test)
            if truth is not None:
                value, more = self._eval(node.body if truth else node.orelse, state, depth + 1)
                return value, origin | more
            (a, ao), (b, bo) = self._eval(node.body, state, depth + 1), self._eval(node.orelse, state, depth + 1)
            return _agree([a, b]), origin | ao | bo
        if isinstance(node, ast.Call):
            return self._eval_call(node, state, depth)
        return _UNKNOWN, none

    def _eval_boolop(self, node: ast.BoolOp, state: dict, depth: int) -> tuple[object, frozenset[int]]:
        results = [self._eval(v, state, depth + 1) for v in node.values]
        origin = frozenset().union(*(o for _, o in results))
        stop = not isinstance(node.op, ast.And)  # `and` stops at the first falsy operand, `or` at a truthy one
        exact = True
        for value, _ in results:
            truth = _truth(value)
            if truth is None:
                exact = False
            elif truth == stop:
                return (value if exact else (_TRUTHY if stop else _FALSY)), origin
        return (results[-1][0] if exact else _UNKNOWN), origin

    def _eval_call(self, node: ast.Call, state: dict, depth: int) -> tuple[object, frozenset[int]]:
        none: frozenset[int] = frozenset()
        if self.builtin(node.func, "bool") and len(node.args) == 1:
            value, origin = self._eval(node.args[0], state, depth + 1)
            truth = _truth(value)
            return (_UNKNOWN if truth is None else truth), origin
        if (self.builtin(node.func, "hasattr") or self.builtin(node.func, "callable")) and node.args:
            value, origin = self._eval(node.args[0], state, depth + 1)
            return (False if value is None or value is False else _UNKNOWN), origin
        name = node.func.id if isinstance(node.func, ast.Name) else (
            node.func.attr if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("self", "cls") else None)
        fns = self.functions.get(name or "", [])
        if len(fns) != 1 or name in self.class_names:
            return _UNKNOWN, none
        fn = fns[0]
        values, origin = [], none
        for sub in _walk_body(fn.body):
            if isinstance(sub, ast.Return):
                value, more = self._eval(sub.value, state, depth + 1) if sub.value is not None else (None, none)
                values.append(value)
                origin |= more
        if not fn.body or not _terminates(fn.body):
            values.append(None)  # falls off the end
        return _agree(values), origin

    # ---- helpers of the fallback analysis ------------------------------------------------------
    def _key(self, node: ast.AST | None) -> _Key | None:
        """What a name or an attribute of self/cls/an own class refers to, across the file."""
        if isinstance(node, ast.Name):
            return ("name", node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
                node.value.id in ("self", "cls") or node.value.id in self.class_names):
            return ("attr", node.attr)
        return None

    def _bindings(self) -> dict[_Key, list[ast.AST | None]]:
        """Every value each key is bound to in the file; None for a binding whose value is unknown
        (a parameter, a loop or with target, an unpacking, an augmented assignment ...)."""
        cached = getattr(self, "_bindings_cache", None)
        if cached is not None:
            return cached
        found: dict[_Key, list[ast.AST | None]] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                key = ("name", node.id) if isinstance(node, ast.Name) else ("attr", node.attr)
                parent = self.parents.get(node)
                value = None
                if isinstance(parent, ast.Assign) and node in parent.targets:
                    value = parent.value
                elif isinstance(parent, (ast.AnnAssign, ast.NamedExpr)) and parent.target is node:
                    value = parent.value
                found.setdefault(key, []).append(value)
            elif isinstance(node, ast.arg):
                found.setdefault(("name", node.arg), []).append(None)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.setdefault(("name", node.name), []).append(None)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    found.setdefault(("name", (alias.asname or alias.name).split(".")[0]), []).append(None)
            elif isinstance(node, ast.Call) and any(self.builtin(node.func, b) for b in ("setattr", "delattr")):
                name = _const_str(node.args[1]) if len(node.args) > 1 else None
                if name:
                    found.setdefault(("attr", name), []).append(None)
        self._bindings_cache = found
        return found

    def _agreed_constant(self, values: list[ast.AST | None], skip: ast.AST | None = None) -> object:
        """The one constant every other binding of a key assigns, or _UNKNOWN."""
        constants = []
        for value in values:
            if value is skip:
                continue
            if not isinstance(value, ast.Constant):
                return _UNKNOWN
            constants.append(value.value)
        return _agree(constants) if constants else _UNKNOWN

    def _none_only_keys(self, bindings: dict[_Key, list[ast.AST | None]]) -> set[_Key]:
        """Keys that every binding in the file sets to None (a module that was never built)."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and any(self.builtin(node.func, b)
                                                  for b in ("globals", "vars", "exec", "eval")):
                return set()  # bindings made by name cannot be seen
            if isinstance(node, ast.Call) and self.builtin(node.func, "setattr") and not (
                    len(node.args) > 1 and _const_str(node.args[1])):
                return set()
        return {key for key, values in bindings.items()
                if values and all(isinstance(v, ast.Constant) and v.value is None for v in values)}

    def _always_raises(self, body: list[ast.stmt], none_only: set[_Key]) -> str | None:
        """The None-only name the try body dereferences unconditionally before anything else returns."""
        for stmt in body:
            if isinstance(stmt, _COMPOUND):
                return None
            for node in _unconditional(stmt):
                target = node.value if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) else (
                    node.func if isinstance(node, ast.Call) else None)
                key = self._key(target)
                if key in none_only:
                    return ast.unparse(target) if hasattr(ast, "unparse") else key[1]
            if isinstance(stmt, (ast.Return, ast.Raise)):
                return None
        return None

    @staticmethod
    def _catches(handler: ast.ExceptHandler, names: tuple[str, ...]) -> bool:
        if handler.type is None:
            return True
        kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        return any(isinstance(k, ast.Name) and k.id in {"Exception", "BaseException", *names} for k in kinds)

    @staticmethod
    def _reraises(handler: ast.ExceptHandler) -> bool:
        return bool(handler.body) and isinstance(handler.body[-1], ast.Raise) and not any(
            isinstance(n, ast.Return) for n in _walk_body(handler.body))

    def _builder_functions(self) -> set[str]:
        """Functions of the file that build a kernel, directly or through another such function."""
        builders: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, fns in self.functions.items():
                if name in builders:
                    continue
                if any(isinstance(n, ast.Call) and self._has_build(n, builders)
                       for fn in fns for n in _walk_body(fn.body)):
                    builders.add(name)
                    changed = True
        return builders

    def _has_build(self, node: ast.AST, builders: set[str]) -> bool:
        """Whether an expression calls a kernel build (load_inline, cpp_extension.load, a builder)."""
        for sub in _walk_local(node):
            if not isinstance(sub, ast.Call):
                continue
            if (self.qual(sub.func) or "").endswith(_BUILD_CALLS):
                return True
            name = sub.func.id if isinstance(sub.func, ast.Name) else (
                sub.func.attr if isinstance(sub.func, ast.Attribute) and isinstance(sub.func.value, ast.Name)
                and sub.func.value.id in ("self", "cls") else None)
            if name in builders:
                return True
        return False

    def _forward_reachable(self) -> set[ast.AST]:
        """Functions a forward call may run: every forward / __call__ and, transitively, the
        functions and methods of the file they call by name (a name matches each def of it)."""
        cached = getattr(self, "_reachable_cache", None)
        if cached is not None:
            return cached
        reached: set[ast.AST] = set()
        queue = [fn for cls, fn in self._methods() if cls is not None and fn.name in ("forward", "__call__")]
        while queue:
            fn = queue.pop()
            if fn in reached:
                continue
            reached.add(fn)
            for sub in _walk_body(fn.body):
                if isinstance(sub, ast.Call):
                    name = sub.func.id if isinstance(sub.func, ast.Name) else (
                        sub.func.attr if isinstance(sub.func, ast.Attribute) else None)
                    queue.extend(self.functions.get(name or "", []))
                    if isinstance(sub.func, ast.Attribute) and sub.func.attr == "apply":
                        queue.extend(self.functions.get("forward", []))  # torch.autograd.Function
        self._reachable_cache = reached
        return reached

    def _enclosing_function(self, node: ast.AST) -> ast.AST | None:
        current = self.parents.get(node)
        while current is not None and not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef)):
            current = self.parents.get(current)
        return current

    def _blocks(self) -> Iterator[list[ast.stmt]]:
        for node in ast.walk(self.tree):
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                    yield block

    def _import_error_only(self, handler: ast.ExceptHandler) -> bool:
        kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        return all(isinstance(k, ast.Name) and k.id in ("ImportError", "ModuleNotFoundError") for k in kinds)

    def _computes(self, body: list[ast.stmt]) -> bool:
        for node in _walk_body(body):
            if isinstance(node, ast.Return) and node.value is not None and not _is_const(node.value):
                return True
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                return True
            if isinstance(node, ast.Call):
                func = self.qual(node.func) or ""
                if func.startswith("torch.") and not func.startswith(("torch.cuda.synchronize", "torch.cuda.empty_cache")):
                    return True
                if isinstance(node.func, ast.Attribute) and node.func.attr in _TORCH_METHODS:
                    return True
                if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                        and node.func.value.id == "self" and node.func.attr not in ("_log", "log"):
                    return True
                if isinstance(node.func, ast.Call) and self.builtin(node.func.func, "super"):
                    return True
        return False

    # ---- function-level analyses ---------------------------------------------------------------
    def _methods(self) -> Iterator[tuple[ast.ClassDef | None, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        yield node, item
        for stmt in self.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield None, stmt

    def _output_functions(self) -> set[ast.AST]:
        cached = getattr(self, "_outputs_cache", None)
        if cached is not None:
            return cached
        by_name: dict[str, list[ast.AST]] = {}
        for _, fn in self._methods():
            by_name.setdefault(fn.name, []).append(fn)
        outputs: set[ast.AST] = set()
        queue = [fn for cls, fn in self._methods() if cls is not None and fn.name in ("forward", "__call__")]
        while queue:
            fn = queue.pop()
            if fn in outputs:
                continue
            outputs.add(fn)
            returned = self._returned_names(fn)
            exprs: list[ast.AST] = [n.value for n in _walk_body(fn.body) if isinstance(n, ast.Return) and n.value]
            for n in _walk_body(fn.body):
                if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in returned for t in n.targets):
                    exprs.append(n.value)
            for expr in exprs:
                for sub in ast.walk(expr):
                    if isinstance(sub, ast.Call):
                        name = None
                        if isinstance(sub.func, ast.Name):
                            name = sub.func.id
                        elif isinstance(sub.func, ast.Attribute) and isinstance(sub.func.value, ast.Name) \
                                and sub.func.value.id in ("self", "cls"):
                            name = sub.func.attr
                        queue.extend(by_name.get(name or "", []))
        self._outputs_cache = outputs
        return outputs

    def _is_output_function(self, fn: ast.AST) -> bool:
        return fn in self._output_functions()

    @staticmethod
    def _returned_names(fn: ast.AST) -> set[str]:
        names: set[str] = set()
        for node in _walk_body(fn.body):
            if isinstance(node, ast.Return) and node.value is not None:
                names.update(n.id for n in ast.walk(node.value) if isinstance(n, ast.Name))
        return names

    def _function_analyses(self) -> None:
        cached_functions = self._cached_functions()
        entry = self._entry_classes()
        for cls, fn in self._methods():
            output = self._is_output_function(fn)
            if output:
                self._result_cache(fn, cls)
                if fn.name in cached_functions and fn.name in ("forward", "__call__"):
                    self.add(Flag.RESULT_CACHE, fn, f"{fn.name} is memoised with functools: outputs reused")
                self._cached_calls(fn, cached_functions)
                for node in _walk_body(fn.body):
                    if isinstance(node, (ast.With, ast.AsyncWith)):
                        for item in node.items:
                            expr = item.context_expr
                            if isinstance(expr, ast.Call) and self.qual(expr.func) == "contextlib.suppress":
                                self.add(Flag.SWALLOWED_EXCEPTION, node, "contextlib.suppress on the forward path")
            if cls is not None and fn.name == "forward" and cls.name in entry:
                self._aliasing(fn, cls)

    def _cached_functions(self) -> set[str]:
        names: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for deco in node.decorator_list:
                    target = deco.func if isinstance(deco, ast.Call) else deco
                    if (self.qual(target) or "") in _CACHE_DECORATORS:
                        names.add(node.name)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                call = node.value
                inner = call.func.func if isinstance(call.func, ast.Call) else call.func
                if (self.qual(inner) or "") in _CACHE_DECORATORS:
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            names.add(target.id)
                        elif isinstance(target, ast.Attribute):
                            names.add(target.attr)
        return names

    def _cached_calls(self, fn: ast.AST, cached: set[str]) -> None:
        if not cached:
            return
        params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs} - {"self", "cls"}
        for node in _walk_body(fn.body):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else (
                node.func.attr if isinstance(node.func, ast.Attribute) else None)
            if name in cached:
                args = list(node.args) + [k.value for k in node.keywords]
                if any(isinstance(a, ast.Name) and a.id in params for a in args):
                    self.add(Flag.RESULT_CACHE, node, f"memoised {name} called with the input tensors (cached by id)")

    # result caches: outputs stored in or returned from persistent state keyed by pointer/id/shape
    def _result_cache(self, fn: ast.AST, cls: ast.ClassDef | None) -> None:
        args = fn.args
        params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        self_name = params[0] if cls is not None and params else None
        mutable_defaults: set[str] = set()
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in pairs:
            if isinstance(default, (ast.Dict, ast.List, ast.Set)) or (
                    isinstance(default, ast.Call) and isinstance(default.func, ast.Name)
                    and default.func.id in ("dict", "list", "set", "OrderedDict", "defaultdict")):
                mutable_defaults.add(arg.arg)
        body_nodes = list(_walk_body(fn.body))
        declared_global = {n for node in body_nodes if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}
        local_names = {n.id for n in body_nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        persistent_names = (declared_global | mutable_defaults | (
            self.module_vars - local_names - self.class_names - set(self.functions))) - set(self.aliases)
        tensor_params = (set(params) | {a.arg for a in (args.vararg, args.kwarg) if a is not None}) - {self_name}

        def chain(e: ast.AST | None) -> str | None:
            """'self._cache' for self._cache[k], self._cache.get(k), type(self)._cache ...; None if not persistent."""
            while True:
                if isinstance(e, ast.Subscript):
                    e = e.value
                elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _PASSTHROUGH:
                    e = e.func.value
                else:
                    break
            parts: list[str] = []
            while isinstance(e, ast.Attribute):
                parts.append(e.attr)
                e = e.value
            if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "type" and e.args:
                e = e.args[0]
            if isinstance(e, ast.Name) and (e.id in (self_name, "cls") or e.id in persistent_names
                                            or (e.id in self.class_names and parts)):
                root = "self" if e.id in (self_name, "cls") or e.id in self.class_names else e.id
                return ".".join([root, *reversed(parts)])
            return None

        key_names: set[str] = set()
        lookups: dict[str, set[str]] = {}

        def has_key(e: ast.AST | None) -> bool:
            if e is None:
                return False
            for sub in ast.walk(e):
                if isinstance(sub, ast.Call):
                    if isinstance(sub.func, ast.Attribute) and sub.func.attr in _KEY_CALLS:
                        return True
                    if isinstance(sub.func, ast.Name) and sub.func.id in ("id", "hash") and sub.func.id not in self.bound:
                        return True
                elif isinstance(sub, ast.Attribute) and sub.attr in _KEY_ATTRS:
                    return True
                elif isinstance(sub, ast.Name) and (sub.id in key_names or sub.id in tensor_params):
                    return True
            return False

        def sources(e: ast.AST | None) -> set[str]:
            """The persistent state an expression reads its value from (empty: a fresh value)."""
            if e is None:
                return set()
            if isinstance(e, (ast.Tuple, ast.List)):
                return set().union(*(sources(x) for x in e.elts)) if e.elts else set()
            if isinstance(e, ast.Name):
                if e.id in lookups:
                    return lookups[e.id]
                return {e.id} if e.id in persistent_names else set()
            if isinstance(e, (ast.Attribute, ast.Subscript)) or (
                    isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _PASSTHROUGH):
                found = chain(e)
                if found:
                    return {found}
                inner = e.func.value if isinstance(e, ast.Call) else e.value
                return sources(inner)
            return set()

        assigns = [n for n in body_nodes if isinstance(n, ast.Assign)]
        for _ in range(3):
            for node in assigns:
                names = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
                if has_key(node.value):
                    key_names.update(names)
                found = sources(node.value)
                if found:
                    for name in names:
                        lookups.setdefault(name, set()).update(found)

        replays = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "replay"
                      for n in body_nodes) and any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "copy_"
            and chain(n.func.value) and n.args and not chain(n.args[0]) for n in body_nodes)
        if replays:
            return  # a CUDA graph fed the current inputs: recomputed on every call

        returns = [n for n in body_nodes if isinstance(n, ast.Return) and n.value is not None]
        returned = self._returned_names(fn)
        returned_sources: set[str] = set()
        for r in returns:
            returned_sources |= sources(r.value)

        def reads_back(container: str) -> bool:
            return any(s == container or s.startswith(container + ".") for s in returned_sources)

        # R1: persistent[key] = value, keyed by pointer/id/shape, where the value is what is returned
        for node in body_nodes:
            stores: list[tuple[ast.AST, ast.AST, ast.AST, ast.AST | None]] = []
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript):
                        stores.append((node, target.value, target.slice, node.value))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("setdefault", "__setitem__") and node.args:
                stores.append((node, node.func.value, node.args[0], node.args[1] if len(node.args) > 1 else None))
            for where, container_node, key, value in stores:
                container = chain(container_node)
                if container is None or not has_key(key):
                    continue
                value_names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)} if value is not None else set()
                if value_names & returned or reads_back(container):
                    self.add(Flag.RESULT_CACHE, where, "stores outputs in persistent state keyed by pointer, id or shape")

        # R2: if <check on saved state>: return <saved state>
        for node in body_nodes:
            if not isinstance(node, ast.If):
                continue
            if not any(chain(n) for n in ast.walk(node.test) if isinstance(n, (ast.Name, ast.Attribute, ast.Subscript))):
                continue
            for branch in (node.body, node.orelse):
                for sub in _walk_body(branch):
                    if isinstance(sub, ast.Return) and sources(sub.value):
                        self.add(Flag.RESULT_CACHE, sub, "returns a stored result when a check on saved state passes")
                        break

    # static aliasing / mutation of the forward inputs
    # Only the candidate's own inputs matter: a submodule handed an intermediate may return a view
    # of it or update it in place (ShuffleNet's channel shuffle, a residual `x += identity`). So the
    # rule starts at ModelNew's forward and follows the inputs into the file's own functions,
    # methods and submodules through summaries of what each returns and modifies.
    def _entry_classes(self) -> set[str]:
        """ModelNew and the classes of the file it derives from; every class when there is no
        ModelNew (a fragment, whose entry cannot be told)."""
        classes = self._class_defs()
        if "ModelNew" not in classes:
            return set(classes)
        entry: set[str] = set()
        queue = ["ModelNew"]
        while queue:
            name = queue.pop()
            if name in entry or name not in classes:
                continue
            entry.add(name)
            queue.extend(b.id for b in classes[name].bases if isinstance(b, ast.Name))
        return entry

    def _class_defs(self) -> dict[str, ast.ClassDef]:
        cached = getattr(self, "_class_cache", None)
        if cached is None:
            cached = self._class_cache = {n.name: n for n in ast.walk(self.tree) if isinstance(n, ast.ClassDef)}
        return cached

    def _aliasing(self, fn: ast.AST, cls: ast.ClassDef) -> None:
        self._alias_flow(fn, cls.name, bound=True, report=True, depth=0)

    def _alias_flow(self, fn: ast.AST, owner: str | None, bound: bool, report: bool, depth: int) -> _AliasSummary:
        """Which parameters ``fn`` may return (or a view of) and which it modifies in place; with
        ``report``, each return of an input and each modification is a finding."""
        args = fn.args
        positional = [a.arg for a in args.posonlyargs + args.args]
        params = positional[1:] if bound else positional
        alias: dict[str, frozenset[str]] = {p: frozenset({p}) for p in params + [a.arg for a in args.kwonlyargs]}
        relaid: set[str] = set()  # names holding a transposed / permuted / expanded view
        tensorish = {n.value.id for n in _walk_body(fn.body)
                     if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
        returned: set[str] = set()
        mutated: set[str] = set()

        def relayout(e: ast.AST | None) -> bool:
            if isinstance(e, ast.Name):
                return e.id in relaid
            if isinstance(e, ast.Attribute):
                return e.attr in _RELAYOUT_ATTRS
            if isinstance(e, ast.Call):
                if isinstance(e.func, ast.Attribute) and e.func.attr in _RELAYOUT_METHODS:
                    return True
                return (self.qual(e.func) or "") in _RELAYOUT_FUNCS
            return False

        def origins(e: ast.AST | None) -> frozenset[str]:
            if isinstance(e, ast.Name):
                return alias.get(e.id, frozenset())
            if isinstance(e, ast.Attribute):
                return origins(e.value) if e.attr in _VIEW_ATTRS else frozenset()
            if isinstance(e, ast.Subscript):
                return origins(e.value) if _basic_index(e.slice) else frozenset()
            if not isinstance(e, ast.Call):
                return frozenset()
            if isinstance(e.func, ast.Attribute):
                name = e.func.attr
                if name == "contiguous" and relayout(e.func.value):
                    # A transposed or expanded view is not contiguous, so .contiguous() copies it
                    # (bar degenerate shapes, which the dynamic check sees).
                    return frozenset()
                if name in _VIEW_METHODS or _inplace_name(name):
                    return origins(e.func.value)
            func = self.qual(e.func) or ""
            if func in _VIEW_FUNCS and e.args:
                return origins(e.args[0])
            callee = self._callee(e, owner, depth)
            if callee is None:
                return frozenset()
            return frozenset().union(*(origins(a) for a, p in _bind_args(e, callee.params) if p in callee.returned))

        def modified(node: ast.AST, what: frozenset[str], reason: str) -> None:
            if what:
                mutated.update(what)
                if report:
                    self.add(Flag.INPUT_MUTATED, node, reason)

        for stmt, nodes in _statements(fn.body):
            for node in nodes:
                if isinstance(node, ast.Call):
                    self._mutation_call(node, origins, modified)
                    callee = self._callee(node, owner, depth)
                    if callee is not None:
                        for a, p in _bind_args(node, callee.params):
                            if p in callee.mutated:
                                modified(node, origins(a), f"passes an input to {ast.unparse(node.func)}, "
                                                           "which modifies it in place")
                elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store) \
                        and (isinstance(node, ast.Subscript) or node.attr == "data"):
                    modified(node, origins(node.value), "writes into an input tensor")
            if isinstance(stmt, ast.AugAssign):
                target = stmt.target
                if isinstance(target, ast.Subscript):
                    modified(stmt, origins(target.value), "updates an input tensor in place")
                elif isinstance(target, ast.Name) and target.id in tensorish:
                    modified(stmt, alias.get(target.id, frozenset()),
                             f"updates input {target.id} in place ({target.id} op= ...)")
            if isinstance(stmt, ast.Return) and stmt.value is not None:
                values = stmt.value.elts if isinstance(stmt.value, (ast.Tuple, ast.List)) else [stmt.value]
                found = frozenset().union(*(origins(v) for v in values))
                returned.update(found)
                if found and report:
                    self.add(Flag.OUTPUT_ALIASES_INPUT, stmt, "returns an input or a view of one")
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    pairs: list[tuple[ast.AST, ast.AST | None]] = [(target, stmt.value)]
                    if isinstance(target, (ast.Tuple, ast.List)):
                        values = stmt.value.elts if isinstance(stmt.value, (ast.Tuple, ast.List)) and \
                            len(stmt.value.elts) == len(target.elts) else [None] * len(target.elts)
                        pairs = list(zip(target.elts, values))
                    for t, v in pairs:
                        if isinstance(t, ast.Name):
                            alias[t.id] = origins(v) if v is not None else frozenset()
                            (relaid.add if v is not None and relayout(v) else relaid.discard)(t.id)
            elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.AnnAssign)):
                for node in nodes:
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        alias.pop(node.id, None)
                        relaid.discard(node.id)
        return _AliasSummary(tuple(params), frozenset(returned), frozenset(mutated))

    def _mutation_call(self, node: ast.Call, origins, modified) -> None:
        if isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if _inplace_name(name) and origins(node.func.value):
                modified(node, origins(node.func.value), f".{name}() modifies an input tensor in place")
                return
        func = self.qual(node.func) or ""
        out = _kw(node, "out")
        if out is not None:
            outs = out.elts if isinstance(out, (ast.Tuple, ast.List)) else [out]
            found = frozenset().union(*(origins(e) for e in outs))
            if found:
                modified(node, found, "writes a result into an input tensor (out=...)")
                return
        inplace = _kw(node, "inplace")
        if isinstance(inplace, ast.Constant) and inplace.value is True and node.args and origins(node.args[0]):
            modified(node, origins(node.args[0]), "inplace=True on an input tensor")
            return
        if func.startswith("torch.") and func.endswith("_") and not func.split(".")[-1].startswith("_") \
                and node.args and origins(node.args[0]):
            modified(node, origins(node.args[0]), f"{func} modifies an input tensor in place")

    def _callee(self, call: ast.Call, owner: str | None, depth: int) -> _AliasSummary | None:
        """The summary of a function of this file that ``call`` runs, if it can be told which."""
        if depth >= 4:
            return None
        target = self._resolve_call(call, owner)
        if target is None:
            return None
        fn, cls, bound = target
        memo = self.__dict__.setdefault("_alias_memo", {})
        key = (id(fn), bound)
        if key not in memo:
            memo[key] = _AliasSummary((), frozenset(), frozenset())  # recursion: assume nothing
            memo[key] = self._alias_flow(fn, cls, bound, report=False, depth=depth + 1)
        return memo[key]

    def _resolve_call(self, call: ast.Call, owner: str | None) -> tuple[ast.AST, str | None, bool] | None:
        func = call.func
        classes = self._class_defs()
        if isinstance(func, ast.Name):
            fn = self._top_functions().get(func.id)
            return (fn, None, False) if fn is not None else None
        if not isinstance(func, ast.Attribute):
            return None
        receiver = func.value
        if isinstance(receiver, ast.Name) and receiver.id == "self" and owner:
            method = self._method(owner, func.attr)
            if method is not None:
                return method, owner, not _is_static(method)
            module = self._submodule_class(owner, func.attr)
            forward = self._method(module, "forward") if module else None
            return (forward, module, True) if forward is not None else None
        if isinstance(receiver, ast.Call) and self.builtin(receiver.func, "super") and owner in classes:
            for base in classes[owner].bases:
                if isinstance(base, ast.Name):
                    method = self._method(base.id, func.attr)
                    if method is not None:
                        return method, base.id, True
            return None
        if isinstance(receiver, ast.Name) and receiver.id in classes:
            if func.attr == "apply":  # torch.autograd.Function: forward(ctx, *inputs)
                forward = self._method(receiver.id, "forward")
                return (forward, receiver.id, True) if forward is not None else None
            method = self._method(receiver.id, func.attr)
            if method is not None and _is_static(method):
                return method, receiver.id, False
        return None

    def _top_functions(self) -> dict[str, ast.AST]:
        cached = getattr(self, "_top_cache", None)
        if cached is None:
            cached = self._top_cache = {s.name: s for s in self.tree.body
                                        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
        return cached

    def _method(self, cls_name: str, name: str, seen: frozenset[str] = frozenset()) -> ast.AST | None:
        classes = self._class_defs()
        cls = classes.get(cls_name)
        if cls is None or cls_name in seen:
            return None
        for item in cls.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                return item
        for base in cls.bases:
            if isinstance(base, ast.Name):
                found = self._method(base.id, name, seen | {cls_name})
                if found is not None:
                    return found
        return None

    def _submodule_class(self, owner: str, attr: str) -> str | None:
        """The class of this file that ``self.<attr> = Class(...)`` makes in the owner's methods."""
        cls = self._class_defs().get(owner)
        if cls is None:
            return None
        for node in ast.walk(cls):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Name) and node.value.func.id in self._class_defs()):
                continue
            for target in node.targets:
                if isinstance(target, ast.Attribute) and target.attr == attr and isinstance(target.value, ast.Name) \
                        and target.value.id == "self":
                    return node.value.func.id
        return None

    # ---- embedded sources ----------------------------------------------------------------------
    def _strings(self) -> None:
        for node in ast.walk(self.tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            parent = self.parents.get(node)
            if isinstance(parent, ast.Expr):
                continue  # docstrings and bare strings are prose, not sources
            text = node.value
            if len(text) < 8 or not _CPP_LIKE.search(text):
                continue
            self._cpp(text, getattr(node, "lineno", 1))

    def _cpp(self, text: str, line: int) -> None:
        def at(pos: int) -> int:
            return line + text.count("\n", 0, pos)

        for flag, pattern, reason in _CPP_RULES:
            for match in pattern.finditer(text):
                self.add(flag, at(match.start()), reason.format(m=match.group(0).strip()[:60]))
        if self.wide:
            for match in _CPP_TF32.finditer(text):
                self.add(Flag.PRECISION_DOWNCAST, at(match.start()),
                         f"CUDA source uses TF32 / reduced-precision math ({match.group(0)}) in a {self.dtype} problem")
            for match in _CPP_HALF.finditer(text):
                self.add(Flag.PRECISION_DOWNCAST, at(match.start()),
                         f"CUDA source uses {match.group(0).strip()} in a {self.dtype} problem")
        for match in _CPP_FP8.finditer(text):
            self.add(Flag.PRECISION_DOWNCAST, at(match.start()),
                     f"CUDA source uses {match.group(0)} (fp8 / fp16 accumulation)")
        if _CPP_PTR_COMPARE.search(text):
            for match in _CPP_STATIC_HOLD.finditer(text):
                self.add(Flag.RESULT_CACHE, at(match.start()),
                         "CUDA/C++ source keeps a static tensor/pointer and compares input pointers (cached result)")
        for match in _CPP_STATIC_MAP.finditer(text):
            self.add(Flag.RESULT_CACHE, at(match.start()), "CUDA/C++ source keeps tensors in a static map")


@dataclass(frozen=True)
class _AliasSummary:
    params: tuple[str, ...]  # as the caller passes them (self / ctx left out)
    returned: frozenset[str]  # parameters the function may return, or a view of
    mutated: frozenset[str]  # parameters it modifies in place


_RELAYOUT_METHODS = {"t", "transpose", "permute", "movedim", "moveaxis", "swapaxes", "swapdims", "expand",
                     "expand_as", "diagonal", "unfold"}
_RELAYOUT_ATTRS = {"T", "mT", "H", "mH"}
_RELAYOUT_FUNCS = {"torch.t", "torch.transpose", "torch.permute", "torch.movedim", "torch.moveaxis",
                   "torch.swapaxes", "torch.swapdims", "torch.diagonal"}


def _inplace_name(name: str) -> bool:
    return name.endswith("_") and not name.startswith("_") and name not in _SAFE_INPLACE


def _is_static(fn: ast.AST) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in getattr(fn, "decorator_list", []))


def _bind_args(call: ast.Call, params: tuple[str, ...]) -> Iterator[tuple[ast.AST, str]]:
    """(argument, parameter name) for the arguments of a call that can be matched by position or name."""
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            break
        if index < len(params):
            yield arg, params[index]
    for keyword in call.keywords:
        if keyword.arg is not None:
            yield keyword.value, keyword.arg


def _basic_index(index: ast.AST) -> bool:
    """Basic indexing (slices, integers, None, Ellipsis) returns a view; tensor indices copy."""
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    for item in items:
        if isinstance(item, ast.Slice):
            continue
        if isinstance(item, ast.Constant) and (item.value is None or item.value is Ellipsis
                                               or isinstance(item.value, int)):
            continue
        if isinstance(item, ast.UnaryOp) and isinstance(item.operand, ast.Constant):
            continue
        return False
    return True

"""The static scanner: every exploit's static signal is found, honest code gets no finding.

Four sources of honest code: the adversarial corpus's honest candidates, the built-in suite's
example candidates (globbed at test time, whatever exists then), KernelBench's own references
submitted as candidates, and inline snippets that sit close to a rule without meeting it.

Fallbacks that are honest while the kernel works are conditional findings; their fallback lines
are checked against what a line tracer records when the candidate really runs, with a build that
works and one that fails.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import re
import textwrap
import time
import types
from pathlib import Path

import pytest

from hercules.harness.integrity import ExecutedLines
from hercules.harness.records import Flag
from hercules.harness.static_scan import Finding, lines_executed, scan_candidate
from hercules.problems.model import read_metadata

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "adversarial"
SUITE = ROOT / "src" / "hercules" / "suite"
KERNELBENCH = next((p for p in (ROOT / "corpora" / "kernelbench", ROOT.parent / "shared" / "corpora" / "kernelbench")
                    if p.is_dir()), None)
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
FLAG_VALUES = {f.value for f in Flag}


def _problem_dtype(path: Path) -> str:
    try:
        return str(read_metadata(ast.parse(path.read_text())).get("dtype", "float32"))
    except (OSError, SyntaxError, ValueError):
        return "float32"


def _flags(code: str, dtype: str = "float32") -> set[str]:
    return {f.flag for f in scan_candidate(code, dtype)}


def _describe(findings: list[Finding]) -> str:
    return "; ".join(f"{f.flag}@{f.line}: {f.reason}" for f in findings)


# ---- the corpus -------------------------------------------------------------------------------

EXPLOITS = sorted(k for k, v in MANIFEST.items() if v["expect"] == "caught")
HONEST = sorted(k for k, v in MANIFEST.items() if v["expect"] == "ok")


def test_manifest_is_consistent():
    on_disk = {str(p.relative_to(CORPUS)) for p in CORPUS.glob("honest/*.py")} | {
        str(p.relative_to(CORPUS)) for p in CORPUS.glob("exploits/*.py")}
    assert on_disk == set(MANIFEST), "every candidate file has exactly one manifest entry"
    for name, entry in MANIFEST.items():
        assert (CORPUS / "problems" / f"{entry['problem']}.py").is_file(), name
        assert entry["expect"] in ("ok", "caught"), name
        for key in ("flags_any", "static_flags"):
            assert set(entry[key]) <= FLAG_VALUES, f"{name}: unknown flag in {key}"
        if entry["expect"] == "ok":
            assert not entry["flags_any"] and not entry["static_flags"] and not entry["or_status"], name


def test_every_threat_has_an_exploit():
    covered = {flag for k in EXPLOITS for flag in MANIFEST[k]["flags_any"] + MANIFEST[k]["static_flags"]}
    for flag in ("side_stream", "tensor_subclass", "result_cache", "problem_edit", "zero_output",
                 "precision_downcast", "monkey_patch", "background_thread", "global_state",
                 "output_aliases_input", "input_mutated", "reference_fallback", "foreign_memory",
                 "fragile_inputs"):
        assert flag in covered, flag


@pytest.mark.parametrize("name", EXPLOITS)
def test_exploit_static_signal_found(name):
    entry = MANIFEST[name]
    dtype = _problem_dtype(CORPUS / "problems" / f"{entry['problem']}.py")
    findings = scan_candidate((CORPUS / name).read_text(), dtype)
    missing = set(entry["static_flags"]) - {f.flag for f in findings if not f.note}
    assert not missing, f"{name}: expected {sorted(missing)}, found: {_describe(findings)}"


@pytest.mark.parametrize("name", HONEST)
def test_honest_corpus_candidate_is_clean(name):
    entry = MANIFEST[name]
    dtype = _problem_dtype(CORPUS / "problems" / f"{entry['problem']}.py")
    findings = scan_candidate((CORPUS / name).read_text(), dtype)
    assert findings == [], f"{name}: {_describe(findings)}"


def _suite_candidates() -> list[Path]:
    return sorted((SUITE / "candidates").glob("**/*.py"))


def test_suite_candidates_are_clean():
    """Every example candidate of the built-in suite (as present when the test runs) is clean."""
    files = _suite_candidates()
    if not files:
        pytest.skip("no suite candidates yet")
    dirty = {}
    for path in files:
        problem = SUITE / "problems" / f"{path.parent.name}.py"
        dtype = _problem_dtype(problem) if problem.is_file() else "float32"
        findings = scan_candidate(path.read_text(), dtype)
        if findings:
            dirty[str(path.relative_to(ROOT))] = _describe(findings)
    assert not dirty, dirty


def _as_candidate(reference: str) -> str:
    """A KernelBench reference submitted as its own candidate: Model renamed ModelNew, as users do."""
    return re.sub(r"\bModel\b", "ModelNew", reference)


def test_kernelbench_references_as_candidates_get_no_flag():
    """Each of KernelBench's references is honest PyTorch: submitted as a candidate, no finding of
    it may be a flag, outright or conditional (notes are allowed)."""
    files = sorted(KERNELBENCH.glob("level[123]/*.py")) if KERNELBENCH else []
    if not files:
        pytest.skip("no KernelBench corpus on this machine")
    flagged = {}
    for path in files:
        findings = [f for f in scan_candidate(_as_candidate(path.read_text()), _problem_dtype(path)) if not f.note]
        if findings:
            flagged[str(path.relative_to(KERNELBENCH))] = _describe(findings)
    assert not flagged, flagged
    assert len(files) >= 250, "the whole corpus was scanned"


# ---- rule by rule --------------------------------------------------------------------------------

POSITIVE = {
    # side streams
    "torch_stream": ("import torch\ns = torch.cuda.Stream()\n", "side_stream"),
    "stream_context": ("import torch\ndef f(x, s):\n    with torch.cuda.stream(s):\n        return x + 1\n", "side_stream"),
    "stream_from_import": ("from torch.cuda import Stream\ns = Stream()\n", "side_stream"),
    "external_stream": ("import torch\ns = torch.cuda.ExternalStream(123)\n", "side_stream"),
    "set_stream": ("import torch\ntorch.cuda.set_stream(None)\n", "side_stream"),
    "cpp_stream_create": ('src = """#include <cuda.h>\nvoid f() { cudaStream_t s; cudaStreamCreate(&s); }\n"""\n',
                          "side_stream"),
    "cpp_stream_pool": ('src = """auto s = at::cuda::getStreamFromPool();\n"""\n', "side_stream"),
    "cpp_nonblocking": ('src = """cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);"""\n', "side_stream"),
    # threads
    "threading": ("import threading\nthreading.Thread(target=print).start()\n", "background_thread"),
    "low_level_thread": ("import _thread\n_thread.start_new_thread(print, ())\n", "background_thread"),
    "executor": ("from concurrent.futures import ThreadPoolExecutor\npool = ThreadPoolExecutor(2)\n",
                 "background_thread"),
    "multiprocessing": ("import multiprocessing as mp\np = mp.Process(target=print)\n", "background_thread"),
    "asyncio": ("import asyncio\nloop = asyncio.new_event_loop()\n", "background_thread"),
    "jit_fork": ("import torch\nfut = torch.jit.fork(print)\n", "background_thread"),
    "cpp_std_thread": ('src = """#include <thread>\nvoid f() { std::thread t([]{}); t.detach(); }\n"""\n',
                       "background_thread"),
    "cpp_pthread": ('src = """void f() { pthread_t t; pthread_create(&t, 0, g, 0); }"""\n', "background_thread"),
    # monkey-patching
    "patch_allclose": ("import torch\ntorch.allclose = lambda *a, **k: True\n", "monkey_patch"),
    "patch_assert_close": ("import torch.testing\ntorch.testing.assert_close = lambda *a, **k: None\n", "monkey_patch"),
    "patch_perf_counter": ("import time\ntime.perf_counter = lambda: 0.0\n", "monkey_patch"),
    "patch_perf_counter_alias": ("from time import perf_counter\nimport time as t\nt.perf_counter = perf_counter\n",
                                 "monkey_patch"),
    "patch_synchronize": ("import torch\ntorch.cuda.synchronize = lambda *a: None\n", "monkey_patch"),
    "patch_elapsed": ("import torch\ntorch.cuda.Event.elapsed_time = lambda s, e: 0.0\n", "monkey_patch"),
    "patch_event_alias": ("import torch\nEvent = torch.cuda.Event\nEvent.elapsed_time = None\n", "monkey_patch"),
    "patch_tensor_eq": ("import torch\ntorch.Tensor.__eq__ = lambda a, b: True\n", "monkey_patch"),
    "patch_functional": ("import torch.nn.functional as F\nF.relu = lambda x: x\n", "monkey_patch"),
    "patch_setattr": ("import torch\nsetattr(torch, 'allclose', None)\n", "monkey_patch"),
    "patch_setattr_getattr": ("import torch\nsetattr(getattr(torch, 'cuda'), 'synchronize', None)\n", "monkey_patch"),
    "patch_builtins": ("import builtins\nbuiltins.print = None\n", "monkey_patch"),
    "patch_dunder_builtins": ("__builtins__['len'] = None\n", "monkey_patch"),
    "patch_module_dict": ("import math\nmath.__dict__['isclose'] = None\n", "monkey_patch"),
    "patch_vars_update": ("import numpy as np\nvars(np).update(allclose=None)\n", "monkey_patch"),
    "patch_import_module": ("import importlib\nimportlib.import_module('time').time = None\n", "monkey_patch"),
    "patch_delattr": ("import torch\ndelattr(torch, 'allclose')\n", "monkey_patch"),
    "patch_exec": ("exec('import torch\\ntorch.allclose = None')\n", "monkey_patch"),
    "settrace": ("import sys\nsys.settrace(lambda *a: None)\n", "monkey_patch"),
    "aten_override": ("import torch\nlib = torch.library.Library('aten', 'IMPL')\n", "monkey_patch"),
    "dispatch_mode": ("from torch.utils._python_dispatch import TorchDispatchMode\nclass M(TorchDispatchMode):\n    pass\n",
                      "monkey_patch"),
    "module_hook": ("import torch\ntorch.nn.modules.module.register_module_forward_hook(print)\n", "monkey_patch"),
    "cpp_aten_impl": ('src = """TORCH_LIBRARY_IMPL(aten, CUDA, m) { m.impl("mm", &f); }"""\n', "monkey_patch"),
    # global state
    "backends_alias": ("import torch.backends.cudnn as cudnn\ncudnn.deterministic = False\n", "global_state"),
    "matmul_precision": ("import torch\ntorch.set_float32_matmul_precision('highest')\n", "global_state"),
    "default_dtype": ("import torch\ntorch.set_default_dtype(torch.float64)\n", "global_state"),
    "deterministic": ("import torch\ntorch.use_deterministic_algorithms(True)\n", "global_state"),
    "flush_denormal": ("import torch\ntorch.set_flush_denormal(True)\n", "global_state"),
    "inductor_config": ("import torch._inductor.config as cfg\ncfg.max_autotune = True\n", "global_state"),
    "env_write": ("import os\nos.environ['CUBLAS_WORKSPACE_CONFIG'] = ':4096:8'\n", "global_state"),
    "cpp_global_context": ('src = """at::globalContext().setAllowTF32CuBLAS(true);"""\n', "global_state"),
    # precision
    "allow_tf32": ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", "precision_downcast"),
    "cudnn_tf32": ("import torch\ntorch.backends.cudnn.allow_tf32 = True\n", "precision_downcast"),
    "precision_high": ("import torch\ntorch.set_float32_matmul_precision('high')\n", "precision_downcast"),
    "precision_medium": ("import torch\ntorch.set_float32_matmul_precision(precision='medium')\n", "precision_downcast"),
    "autocast": ("import torch\ndef f(a):\n    with torch.autocast('cuda'):\n        return a @ a\n", "precision_downcast"),
    "cuda_amp_autocast": ("import torch\n@torch.cuda.amp.autocast()\ndef f(a):\n    return a @ a\n", "precision_downcast"),
    "amp_autocast_decorator": ("from torch.amp import autocast\n@autocast\ndef f(a):\n    return a\n", "precision_downcast"),
    "half": ("def f(a):\n    return a.half()\n", "precision_downcast"),
    "bfloat16": ("def f(a):\n    return a.bfloat16()\n", "precision_downcast"),
    "to_half": ("import torch\ndef f(a):\n    return a.to(torch.half)\n", "precision_downcast"),
    "to_bf16_kw": ("import torch\ndef f(a):\n    return a.to(device=a.device, dtype=torch.bfloat16)\n", "precision_downcast"),
    "dtype_kw": ("import torch\nw = torch.empty(4, dtype=torch.float16)\n", "precision_downcast"),
    "dtype_variable": ("import torch\nDT = torch.float16\ndef f(a):\n    return a.to(DT)\n", "precision_downcast"),
    "fp8": ("import torch\ndef f(a):\n    return a.to(torch.float8_e4m3fn)\n", "precision_downcast"),
    "tl_dot_default": ("import triton.language as tl\ndef k(a, b):\n    return tl.dot(a, b)\n", "precision_downcast"),
    "tl_dot_tf32": ("import triton.language as tl\ndef k(a, b):\n    return tl.dot(a, b, input_precision='tf32')\n",
                    "precision_downcast"),
    "tl_dot_allow_tf32": ("import triton.language as tl\ndef k(a, b):\n    return tl.dot(a, b, allow_tf32=True)\n",
                          "precision_downcast"),
    "tl_to_fp16": ("import triton.language as tl\ndef k(a):\n    return a.to(tl.float16)\n", "precision_downcast"),
    "cpp_half": ('src = """__global__ void k(const __half* x, float* y) {}"""\n', "precision_downcast"),
    "cpp_half2": ('src = """__global__ void k(float* y) { half2 v; }"""\n', "precision_downcast"),
    "cpp_bf16": ('src = """__global__ void k(__nv_bfloat16* y) {}"""\n', "precision_downcast"),
    "cpp_khalf": ('src = """torch::Tensor f(torch::Tensor x) { return x.to(torch::kHalf); }"""\n', "precision_downcast"),
    "cpp_tf32_math": ('src = """cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH);"""\n', "precision_downcast"),
    "cpp_ptx_f16": ('src = """asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 ...");"""\n',
                    "precision_downcast"),
    "env_tf32_override": ("import os\nos.environ['TORCH_ALLOW_TF32_CUBLAS_OVERRIDE'] = '1'\n", "precision_downcast"),
    # tensor subclasses
    "subclass": ("import torch\nclass Lazy(torch.Tensor):\n    pass\n", "tensor_subclass"),
    "subclass_indirect": ("import torch\nclass A(torch.Tensor):\n    pass\nclass B(A):\n    pass\n", "tensor_subclass"),
    "torch_function": ("class W:\n    @classmethod\n    def __torch_function__(cls, f, t, a=(), k=None):\n        pass\n",
                       "tensor_subclass"),
    "torch_dispatch": ("class W:\n    def __torch_dispatch__(self, f, t, a=(), k=None):\n        pass\n", "tensor_subclass"),
    "make_subclass": ("import torch\ndef f(x, C):\n    return torch.Tensor._make_subclass(C, x)\n", "tensor_subclass"),
    "wrapper_subclass": ("import torch\ndef f(x, C):\n    return torch.Tensor._make_wrapper_subclass(C, x.shape)\n",
                         "tensor_subclass"),
    "as_subclass": ("def f(x, C):\n    return x.as_subclass(C)\n", "tensor_subclass"),
    "type_call": ("import torch\nLazy = type('Lazy', (torch.Tensor,), {})\n", "tensor_subclass"),
    "class_assign": ("def f(x, C):\n    x.__class__ = C\n    return x\n", "tensor_subclass"),
    # result caches
    "cache_data_ptr": ("class M:\n    def forward(self, x):\n        k = x.data_ptr()\n        if k in self.c:\n"
                       "            return self.c[k]\n        out = x * 2\n        self.c[k] = out\n        return out\n",
                       "result_cache"),
    "cache_id": ("_C = {}\nclass M:\n    def forward(self, x):\n        out = _C.get(id(x))\n        if out is None:\n"
                 "            out = _C[id(x)] = x * 2\n        return out\n", "result_cache"),
    "cache_shape": ("_C = {}\nclass M:\n    def forward(self, a, b):\n        if a.shape not in _C:\n"
                    "            _C[a.shape] = a @ b\n        return _C[a.shape]\n", "result_cache"),
    "cache_helper": ("class M:\n    def forward(self, x):\n        return self._run(x)\n    def _run(self, x):\n"
                     "        key = tuple(x.shape)\n        if key in self._memo:\n            return self._memo[key]\n"
                     "        y = x + 1\n        self._memo[key] = y\n        return y\n", "result_cache"),
    "cache_last_ptr": ("class M:\n    def forward(self, x):\n        if self._last is not None and self._last[0] == x.data_ptr():\n"
                       "            return self._last[1]\n        out = x * 2\n        self._last = (x.data_ptr(), out)\n"
                       "        return out\n", "result_cache"),
    "cache_first_call": ("class M:\n    def forward(self, x):\n        if self._out is not None:\n"
                         "            return self._out\n        self._out = x * 2\n        return self._out\n", "result_cache"),
    "cache_lru_tensor": ("import functools\n@functools.lru_cache(None)\ndef g(x):\n    return x * 2\nclass M:\n"
                         "    def forward(self, x):\n        return g(x)\n", "result_cache"),
    "cache_lru_forward": ("from functools import lru_cache\nclass M:\n    @lru_cache\n    def forward(self, x):\n"
                          "        return x * 2\n", "result_cache"),
    "cache_mutable_default": ("class M:\n    def forward(self, x, _memo={}):\n        if x.shape in _memo:\n"
                              "            return _memo[x.shape]\n        _memo[x.shape] = y = x * 2\n        return y\n",
                              "result_cache"),
    "cpp_static_cache": ('src = """static torch::Tensor cached; static const float* last = nullptr;\n'
                         'torch::Tensor f(torch::Tensor x) { if (x.data_ptr<float>() == last) return cached;'
                         ' return x; }"""\n', "result_cache"),
    # reaching for the problem
    "sys_modules": ("import sys\nm = sys.modules['__main__']\n", "problem_edit"),
    "import_main": ("import __main__\n", "problem_edit"),
    "import_model": ("from reference import Model\n", "problem_edit"),
    "import_get_inputs": ("from problem import get_inputs\n", "problem_edit"),
    "undefined_model": ("class ModelNew(Model):\n    pass\n", "problem_edit"),
    "gc_objects": ("import gc\nobjs = gc.get_objects()\n", "problem_edit"),
    "inspect_stack": ("import inspect\nframes = inspect.stack()\n", "problem_edit"),
    "getframe": ("import sys\nf = sys._getframe(1)\n", "problem_edit"),
    "f_back": ("def f(frame):\n    return frame.f_back.f_locals\n", "problem_edit"),
    "subclasses": ("import torch\nkinds = torch.nn.Module.__subclasses__()\n", "problem_edit"),
    "open_file": ("src = open('problem.py').read()\n", "problem_edit"),
    "path_read": ("import pathlib\nsrc = pathlib.Path('problem.py').read_text()\n", "problem_edit"),
    "listdir": ("import os\nnames = os.listdir('.')\n", "problem_edit"),
    "env_read": ("import os\nname = os.environ.get('HERCULES_PROBLEM')\n", "problem_edit"),
    "env_getenv": ("import os\nname = os.getenv('PROBLEM_PATH')\n", "problem_edit"),
    "env_iterate": ("import os\nfor k in os.environ:\n    pass\n", "problem_edit"),
    "argv": ("import sys\nargs = sys.argv\n", "problem_edit"),
    "torch_load": ("import torch\nexpected = torch.load('out.pt')\n", "problem_edit"),
    "hasattr_get_inputs": ("def f(m):\n    return hasattr(m, 'get_inputs')\n", "problem_edit"),
    "cpp_ipc": ('src = """cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess);"""\n', "problem_edit"),
    # fallbacks that run in C++, where no line of the file can be traced
    "cpp_catch_fallback": ('src = """try { launch(x); } catch (...) { return at::matmul(a, b); }"""\n',
                           "reference_fallback"),
    # static aliasing / mutation
    "returns_input": ("class M:\n    def forward(self, x):\n        return x\n", "output_aliases_input"),
    "returns_view": ("class M:\n    def forward(self, x):\n        y = x.view(-1)\n        return y, y.sum()\n",
                     "output_aliases_input"),
    "mutates_input": ("class M:\n    def forward(self, x):\n        x.mul_(2)\n        return x * 1\n", "input_mutated"),
    "mutates_via_contiguous": ("class M:\n    def forward(self, x):\n        x = x.contiguous()\n"
                               "        x[0] = 1\n        return x + 0\n", "input_mutated"),
    "mutates_out_kw": ("import torch\nclass M:\n    def forward(self, x, y):\n        torch.add(x, y, out=y)\n"
                       "        return y + 0\n", "input_mutated"),
    "returns_contiguous_input": ("class ModelNew:\n    def forward(self, x):\n        return x.contiguous()\n",
                                 "output_aliases_input"),
    "returns_input_through_submodule": (
        "import torch.nn as nn\nclass Same(nn.Module):\n    def forward(self, t):\n        return t\n"
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.same = Same()\n"
        "    def forward(self, x):\n        return self.same(x)\n", "output_aliases_input"),
    "returns_view_through_helper": (
        "def _flat(t):\n    return t.view(-1)\nclass ModelNew:\n    def forward(self, x):\n        y = _flat(x)\n"
        "        return y\n", "output_aliases_input"),
    "returns_input_through_autograd_function": (
        "import torch\nclass Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, t):\n        return t\n"
        "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return Fn.apply(x)\n",
        "output_aliases_input"),
    "mutates_through_submodule": (
        "import torch.nn as nn\nclass Scale(nn.Module):\n    def forward(self, t):\n        t.mul_(2)\n        return t * 1\n"
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.scale = Scale()\n"
        "    def forward(self, x):\n        return self.scale(x)\n", "input_mutated"),
    "mutates_through_method": (
        "class ModelNew:\n    def forward(self, x):\n        self._scratch(x)\n        return x * 1\n"
        "    def _scratch(self, t):\n        t[0] = 0\n", "input_mutated"),
    "mutates_augassign": ("class M:\n    def forward(self, x):\n        n = x.shape[0]\n        x += 1\n"
                          "        return x * n\n", "input_mutated"),
    # exceptions swallowed on the forward path
    "swallowed_pass": ("import torch\nclass M:\n    def forward(self, x):\n        out = torch.empty_like(x)\n"
                       "        try:\n            kernel(x, out)\n        except Exception:\n            pass\n"
                       "        return out\n", "swallowed_exception"),
    "suppress": ("import contextlib, torch\nclass M:\n    def forward(self, x):\n        out = torch.empty_like(x)\n"
                 "        with contextlib.suppress(Exception):\n            kernel(x, out)\n        return out\n",
                 "swallowed_exception"),
}


@pytest.mark.parametrize("case", sorted(POSITIVE))
def test_rule_fires(case):
    code, flag = POSITIVE[case]
    findings = scan_candidate(code, "float32")
    assert flag in {f.flag for f in findings if f.decisive}, f"{case}: {_describe(findings)}"


# Process-local settings that leave the arithmetic alone: one note each, never a flag.
NOTED = {
    "cudnn_benchmark": "import torch\ntorch.backends.cudnn.benchmark = True\n",
    "cudnn_benchmark_alias": "import torch.backends.cudnn as cudnn\ncudnn.benchmark = True\n",
    "cudnn_benchmark_setattr": "import torch\nsetattr(torch.backends.cudnn, 'benchmark', True)\n",
    "cudnn_enabled": "import torch\ntorch.backends.cudnn.enabled = False\n",
    "num_threads": "import torch\ntorch.set_num_threads(1)\n",
    "interop_threads": "import torch\ntorch.set_num_interop_threads(1)\n",
    "sdp_enable": "import torch\ntorch.backends.cuda.enable_flash_sdp(False)\n",
    "blas_library": "import torch\ntorch.backends.cuda.preferred_blas_library('cublaslt')\n",
}


@pytest.mark.parametrize("case", sorted(NOTED))
def test_neutral_setting_is_noted_not_flagged(case):
    findings = scan_candidate(NOTED[case], "float32")
    assert [(f.flag, f.line, f.note, f.decisive, f.conditional) for f in findings] == [
        ("global_state", 2, True, False, False)], _describe(findings)


def test_numerics_settings_stay_flagged_beside_a_neutral_one():
    # One statement sets both: the line's flag is not hidden by its note.
    code = "import torch\ntorch.backends.cudnn.benchmark = torch.backends.cudnn.deterministic = True\n"
    assert {f.flag for f in scan_candidate(code) if f.decisive} == {"global_state"}
    for code in ("import torch\ntorch.backends.cudnn.allow_tf32 = True\n",
                 "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n",
                 "import torch\ntorch.set_float32_matmul_precision('high')\n",
                 "import torch\ntorch.set_default_dtype(torch.float64)\n",
                 "import torch\ntorch.use_deterministic_algorithms(False)\n",
                 "import torch\ntorch.backends.cudnn.deterministic = False\n"):
        assert "global_state" in {f.flag for f in scan_candidate(code) if f.decisive}, code


# ---- fallbacks: conditional on running -----------------------------------------------------------
# Every line marked "# fallback" must be in the finding's fallback_lines and no other line; the
# runnable cases also really run (below). Each runnable case builds with load_inline, makes
# ModelNew() and calls forward(x); the kernel is `.f(x)` of the built module.

CONDITIONAL = {
    "module_none_branch": (True, """
        import torch
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline
        try:
            mod = load_inline(name="k", cpp_sources="", functions=["f"])
        except Exception:
            mod = None  # fallback
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.mod = mod
            def forward(self, x):
                if self.mod is None:
                    return torch.relu(x)  # fallback
                return self.mod.f(x)
        """),
    "flag_and_fall_through": (True, """
        import torch
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline
        _ext = None
        try:
            _ext = load_inline(name="k", cpp_sources="", functions=["f"])
            HAS_EXT = True
        except Exception:
            HAS_EXT = False  # fallback
        class ModelNew(nn.Module):
            def forward(self, x):
                if HAS_EXT and x.dim() > 0:
                    return _ext.f(x)
                y = torch.relu(x)  # fallback
                return y  # fallback
        """),
    "else_branch_and_multiline_expression": (True, """
        import torch
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline
        try:
            ext = load_inline(name="k", cpp_sources="", functions=["f"])
        except Exception:
            ext = None  # fallback
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.use_kernel = ext is not None
            def forward(self, x):
                if self.use_kernel:
                    y = ext.f(x)
                else:
                    y = torch.relu(x)  # fallback
                return (ext.f(y)
                        if ext is not None
                        else torch.relu(y))  # fallback
        """),
    "lazy_build_in_forward": (True, """
        import torch
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.mod = None
                self.failed = False
            def forward(self, x):
                if self.mod is None and not self.failed:
                    try:
                        self.mod = load_inline(name="k", cpp_sources="", functions=["f"])
                    except RuntimeError:
                        self.failed = True  # fallback
                if self.failed:
                    return torch.relu(x)  # fallback
                return self.mod.f(x)
        """),
    "cached_loader_function": (True, """
        import torch
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline
        _EXT = None
        def _get_ext():
            global _EXT
            if _EXT is None:
                try:
                    _EXT = load_inline(name="k", cpp_sources="", functions=["f"])
                except Exception:
                    _EXT = False  # fallback
            return _EXT
        class ModelNew(nn.Module):
            def forward(self, x):
                ext = _get_ext()
                if not ext:
                    return torch.relu(x)  # fallback
                return ext.f(x)
        """),
    "autograd_function_fall_through": (True, """
        import torch
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline
        _ext = None
        try:
            _ext = load_inline(name="k", cpp_sources="", functions=["f"])
        except Exception:
            _ext = None  # fallback
        class _Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                if _ext is not None and x.dtype == torch.float32:
                    return _ext.f(x)
                return torch.relu(x)  # fallback
        class ModelNew(nn.Module):
            def forward(self, x):
                return _Fn.apply(x)
        """),
    "built_on_some_paths_without_try": (False, """
        import torch
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline
        _ext = None
        if torch.cuda.is_available():
            _ext = load_inline(name="k", cpp_sources="", functions=["f"])
        class ModelNew(nn.Module):
            def forward(self, x):
                if _ext is None or not x.is_cuda:
                    return torch.relu(x)  # fallback
                return _ext.f(x)
        """),
    "forward_handler_computes": (False, """
        import torch
        class M:
            def forward(self, a, b):
                try:
                    return ext.mm(a, b)
                except Exception:
                    return torch.mm(a, b)  # fallback
        """),
    "forward_handler_matmul_operator": (False, """
        class M:
            def forward(self, a, b):
                try:
                    out = ext.mm(a, b)
                except RuntimeError:
                    out = a @ b  # fallback
                return out
        """),
    "forward_handler_functional": (False, """
        import torch.nn.functional as F
        class M:
            def forward(self, x):
                try:
                    return kernel(x)
                except:
                    return F.gelu(x)  # fallback
        """),
    "forward_handler_submodule": (False, """
        class M:
            def forward(self, x):
                try:
                    return kernel(x)
                except Exception:
                    return self.linear(x)  # fallback
        """),
    "forward_handler_returns_other": (False, """
        class M:
            def forward(self, x):
                try:
                    return kernel(x)
                except Exception:
                    return x  # fallback
        """),
    "forward_helper_handler": (False, """
        import torch
        class M:
            def forward(self, x):
                out = self._run(x)
                return out
            def _run(self, x):
                try:
                    return self.ext.f(x)
                except Exception:
                    out = torch.relu(x)  # fallback
                    return out  # fallback
        """),
    "build_swallowed": (False, """
        from torch.utils.cpp_extension import load_inline
        try:
            ext = load_inline(name='k', cpp_sources='', functions=['f'])
        except Exception:
            ext = None  # fallback
        """),
}


def _source(case: str) -> str:
    return textwrap.dedent(CONDITIONAL[case][1]).lstrip("\n")


def _marked(code: str) -> set[int]:
    return {n for n, line in enumerate(code.splitlines(), 1) if line.rstrip().endswith("# fallback")}


def _expand(ranges) -> set[int]:
    return {line for start, end in ranges for line in range(start, end + 1)}


@pytest.mark.parametrize("case", sorted(CONDITIONAL))
def test_fallback_is_conditional_with_its_lines(case):
    code = _source(case)
    findings = scan_candidate(code, "float32")
    fallbacks = [f for f in findings if f.flag == "reference_fallback"]
    assert len(fallbacks) == 1 and fallbacks[0].conditional and not fallbacks[0].decisive, _describe(findings)
    assert _expand(fallbacks[0].fallback_lines) == _marked(code), fallbacks[0]
    # (Other rules may still see something else, e.g. a handler that returns the input itself.)


def _run_candidate(path: Path, monkeypatch, build_works: bool, trace_import: bool) -> set[int]:
    """Import the candidate with a load_inline that works or fails, make ModelNew() and call it
    twice; the lines of its file that ran (from the import on, or during the calls only)."""
    import torch
    import torch.utils.cpp_extension as cpp_extension

    def fake_load_inline(*args, **kwargs):
        if not build_works:
            raise RuntimeError("Error building extension 'k'")
        return types.SimpleNamespace(f=lambda x: x.clamp(min=0))

    monkeypatch.setattr(cpp_extension, "load_inline", fake_load_inline)
    spec = importlib.util.spec_from_file_location(f"candidate_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    whole = ExecutedLines(str(path))
    with whole:
        spec.loader.exec_module(module)
        model = module.ModelNew()
    with ExecutedLines(str(path)) as calls, torch.no_grad():
        for _ in range(2):
            out = model(torch.randn(8))
    assert torch.equal(out, out.clamp(min=0))
    return (whole.lines | calls.lines) if trace_import else calls.lines


RUNNABLE = sorted(k for k, (runnable, _) in CONDITIONAL.items() if runnable)


@pytest.mark.parametrize("case", RUNNABLE)
@pytest.mark.parametrize("trace_import", [False, True])
def test_fallback_lines_run_exactly_when_the_build_failed(case, trace_import, tmp_path, monkeypatch):
    path = tmp_path / f"{case}.py"
    path.write_text(_source(case))
    (finding,) = [f for f in scan_candidate(path.read_text()) if f.flag == "reference_fallback"]
    for build_works in (True, False):
        executed = _run_candidate(path, monkeypatch, build_works, trace_import)
        assert lines_executed(finding.fallback_lines, executed) is (not build_works), (build_works, executed)


def test_fallback_chosen_once_on_one_line_is_seen_from_the_import():
    """A fallback on the kernel call's own line cannot be told apart by line; the caught build's
    handler, which runs at import when the build fails, still can."""
    code = textwrap.dedent("""
        import torch
        from torch.utils.cpp_extension import load_inline
        try:
            ext = load_inline(name="k", cpp_sources="", functions=["f"])
        except Exception:
            ext = None
        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return ext.f(x) if ext is not None else torch.relu(x)
        """).lstrip("\n")
    (finding,) = scan_candidate(code)
    assert finding.conditional and finding.fallback_lines == ((6, 6),)


def test_handler_that_runs_on_every_call_is_a_flag():
    # The module is never built (only ever None), so every call raises and falls back.
    for code in (
        "import torch\n_ext = None\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        try:\n"
        "            return _ext.f(x)\n        except Exception:\n            return torch.relu(x)\n",
        "import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.ext = None\n    def forward(self, x):\n        try:\n            y = x.contiguous()\n"
        "            return self.ext.f(y)\n        except AttributeError:\n            return torch.relu(x)\n",
    ):
        findings = scan_candidate(code)
        assert [(f.flag, f.decisive) for f in findings] == [("reference_fallback", True)], _describe(findings)
    # Bound to something else somewhere (or caught too narrowly to catch the AttributeError): it
    # may work, so it is conditional.
    for code in (
        "import torch\n_ext = None\ndef init(e):\n    global _ext\n    _ext = e\nclass ModelNew(torch.nn.Module):\n"
        "    def forward(self, x):\n        try:\n            return _ext.f(x)\n        except Exception:\n"
        "            return torch.relu(x)\n",
        "import torch\n_ext = None\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        try:\n"
        "            return _ext.f(x)\n        except RuntimeError:\n            return torch.relu(x)\n",
    ):
        findings = scan_candidate(code)
        assert [(f.flag, f.conditional) for f in findings] == [("reference_fallback", True)], _describe(findings)


def test_lines_executed():
    assert lines_executed(((3, 5),), {1, 5}) is True
    assert lines_executed(((3, 5),), {2, 6}) is False
    assert lines_executed(((3, 3), (9, 12)), {10}) is True
    assert lines_executed((), {1, 2, 3}) is False
    assert lines_executed(((1, 100),), set()) is False


NEGATIVE = {
    "seeding_at_import": ("import torch\ntorch.manual_seed(0)\ntorch.cuda.manual_seed_all(0)\n", "float32"),
    "current_stream_cpp": (
        'src = r"""#include <torch/extension.h>\n#include <ATen/cuda/CUDAContext.h>\n'
        '__global__ void k(const float* x, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x;'
        ' if (i < n) y[i] = x[i] * 2.0f; }\n'
        'torch::Tensor f(torch::Tensor x) { auto y = torch::empty_like(x);\n'
        '  auto stream = at::cuda::getCurrentCUDAStream();\n'
        '  k<<<(x.numel() + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());\n'
        '  C10_CUDA_KERNEL_LAUNCH_CHECK();\n  return y; }\n"""\n'
        'cpp = "torch::Tensor f(torch::Tensor x);"\n'
        'import os\nos.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"\n'
        'from torch.utils.cpp_extension import load_inline\n'
        'ext = load_inline(name="k", cpp_sources=cpp, cuda_sources=src, functions=["f"], verbose=False)\n'
        'import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.f(x.contiguous())\n',
        "float32"),
    "current_stream_python": ("import torch\ndef f(x):\n    s = torch.cuda.current_stream()\n    s.synchronize()\n"
                              "    return x\n", "float32"),
    "cuda_graph_idiom": (
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        if self.graph is None:\n            self.static_x = x.clone()\n            s = torch.cuda.Stream()\n"
        "            s.wait_stream(torch.cuda.current_stream())\n            with torch.cuda.stream(s):\n"
        "                self.static_y = self.body(self.static_x)\n"
        "            torch.cuda.current_stream().wait_stream(s)\n            self.graph = torch.cuda.CUDAGraph()\n"
        "            with torch.cuda.graph(self.graph):\n                self.static_y = self.body(self.static_x)\n"
        "        self.static_x.copy_(x)\n        self.graph.replay()\n        return self.static_y.clone()\n",
        "float32"),
    "kernel_cache_by_shape": (
        "_KERNELS = {}\ndef _kernel(n):\n    if n in _KERNELS:\n        return _KERNELS[n]\n    _KERNELS[n] = k = n * 2\n"
        "    return k\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        k = _kernel(x.shape[-1])\n        out = torch.empty_like(x)\n        self._cfg[x.shape] = k\n"
        "        return out\n", "float32"),
    "lru_on_ints": ("import functools, torch\n@functools.lru_cache(None)\ndef block(n):\n    return min(1024, n)\n"
                    "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        b = block(x.shape[-1])\n"
                    "        return x * b\n", "float32"),
    "preallocated_buffer": ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                            "        if self.buf is None or self.buf.shape != x.shape:\n"
                            "            self.buf = torch.empty_like(x)\n        torch.mul(x, 2, out=self.buf)\n"
                            "        return self.buf\n", "float32"),
    "import_guard": ("try:\n    import triton\n    import triton.language as tl\n    HAS_TRITON = True\n"
                     "except ImportError:\n    HAS_TRITON = False\n", "float32"),
    "libdevice_guard": ("try:\n    from triton.language.extra import libdevice\nexcept ImportError:\n"
                        "    from triton.language.extra.cuda import libdevice\n", "float32"),
    "reraise": ("class M:\n    def forward(self, x):\n        try:\n            return kernel(x)\n"
                "        except RuntimeError as exc:\n            raise RuntimeError('kernel failed') from exc\n", "float32"),
    "inplace_on_output": ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x, y):\n"
                          "        x = x.contiguous()\n        out = x * 2\n        out.add_(y)\n        out[0] = 0\n"
                          "        return out\n", "float32"),
    "rebound_input": ("class ModelNew:\n    def forward(self, x):\n        x = x.clone()\n        x.mul_(2)\n"
                      "        return x\n", "float32"),
    "int_param_augassign": ("class ModelNew:\n    def forward(self, x, dim):\n        dim += 1\n"
                            "        return x.sum(dim)\n", "float32"),
    "tl_dot_ieee": ("import triton.language as tl\ndef k(a, b, acc):\n    acc = tl.dot(a, b, acc, input_precision='ieee')\n"
                    "    return tl.dot(a, b, allow_tf32=False)\n", "float32"),
    "bf16_problem_half_types": ('import torch\nsrc = """__global__ void k(__nv_bfloat16* y) { float v = __bfloat162float(y[0]); }"""\n'
                                "def f(x):\n    return x.to(torch.bfloat16)\n", "bfloat16"),
    "bf16_problem_tl_dot": ("import triton.language as tl\ndef k(a, b, acc):\n    return tl.dot(a, b, acc, out_dtype=tl.float32)\n",
                            "bfloat16"),
    "upcast": ("import torch\ndef f(x):\n    return x.float().to(torch.float32).double()\n", "float32"),
    "dtype_compare": ("import torch\ndef f(x):\n    assert x.dtype != torch.float16\n"
                      "    return torch.finfo(torch.float16).max\n", "float32"),
    "autocast_disabled": ("import torch\ndef f(a):\n    with torch.autocast('cuda', enabled=False):\n"
                          "        return a @ a\n", "float32"),
    "tf32_off": ("import torch\ndef f(x):\n    return torch.backends.cuda.matmul.allow_tf32\n", "float32"),
    "get_inputs_copied": ("import torch\nbatch = 16\nclass Model(torch.nn.Module):\n    pass\n"
                          "class ModelNew(torch.nn.Module):\n    pass\ndef get_inputs():\n    return [torch.randn(batch, 4)]\n"
                          "def get_init_inputs():\n    return []\nif __name__ == '__main__':\n    print(get_inputs())\n",
                          "float32"),
    "env_build_vars": ("import os\nos.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\nos.environ.setdefault('MAX_JOBS', '8')\n"
                       "home = os.environ.get('CUDA_HOME', '/usr/local/cuda')\n", "float32"),
    "no_grad_and_compile": ("import torch\nclass ModelNew(torch.nn.Module):\n    @torch.no_grad()\n    def forward(self, x):\n"
                            "        with torch.inference_mode():\n            return torch.compile(torch.relu)(x)\n",
                            "float32"),
    "docstring_mentions": ('"""Uses no std::thread, no cudaStreamCreate and no __half; see sys.modules docs."""\n'
                           "def f(x):\n    '''half2 loads would be faster; we keep fp32.'''\n    return x\n", "float32"),
    "torch_library_custom_op": ("import torch\nlib = torch.library.Library('mylib', 'DEF')\n"
                                "lib.define('f(Tensor x) -> Tensor')\n", "float32"),
    "self_attribute_writes": ("import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n"
                              "        super().__init__()\n        self.weight = torch.nn.Parameter(torch.ones(3))\n"
                              "        setattr(self, 'bias', None)\n", "float32"),
    "submodule_views_an_intermediate": (
        # KernelBench's ShuffleNet: the channel shuffle returns a view of what it is given, and what
        # it is given is an intermediate, never the candidate's input.
        "import torch.nn as nn\nclass ChannelShuffle(nn.Module):\n    def forward(self, x):\n"
        "        b, c, h, w = x.size()\n        x = x.view(b, 2, c // 2, h, w)\n        x = x.transpose(1, 2).contiguous()\n"
        "        return x.view(b, -1, h, w)\n"
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.shuffle = ChannelShuffle()\n"
        "    def forward(self, x):\n        return self.shuffle(x * 2)\n", "float32"),
    "submodule_updates_an_intermediate": (
        "import torch.nn as nn\nclass AddBias(nn.Module):\n    def forward(self, t):\n        t += self.b\n        return t\n"
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.add = AddBias()\n"
        "    def forward(self, x):\n        y = self.lin(x)\n        return self.add(y)\n", "float32"),
    "transposed_copy_returned": (
        "class ModelNew:\n    def forward(self, x):\n        y = x.permute(0, 2, 1)\n        z = y.contiguous()\n"
        "        return x.transpose(0, 1).contiguous(), z, x.T.contiguous()\n", "float32"),
    "device_probe_at_import": (
        "import torch\ntry:\n    DEVICE = torch.device('cuda')\n    torch.empty(1, device=DEVICE)\nexcept RuntimeError:\n"
        "    DEVICE = torch.device('cpu')\n", "float32"),
    "build_retried_with_other_flags": (
        "from torch.utils.cpp_extension import load_inline\ntry:\n"
        "    ext = load_inline(name='fast', cpp_sources='', functions=['f'], extra_cuda_cflags=['--use_fast_math'])\n"
        "except Exception:\n    ext = load_inline(name='plain', cpp_sources='', functions=['f'])\n", "float32"),
    "failed_build_fails_loudly": (
        "import torch\nfrom torch.utils.cpp_extension import load_inline\ntry:\n"
        "    ext = load_inline(name='k', cpp_sources='', functions=['f'])\nexcept Exception as exc:\n"
        "    raise RuntimeError('build failed') from exc\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        return ext.f(x)\n", "float32"),
    "lazy_build_is_not_a_fallback": (
        "import torch\nfrom torch.utils.cpp_extension import load_inline\n_ext = None\n"
        "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        global _ext\n        if _ext is None:\n"
        "            _ext = load_inline(name='k', cpp_sources='', functions=['f'])\n        return _ext.f(x)\n", "float32"),
    "triton_launch": ("import torch, triton\nimport triton.language as tl\n@triton.jit\ndef k(x_ptr, n, B: tl.constexpr):\n"
                      "    o = tl.program_id(0) * B + tl.arange(0, B)\n    tl.store(x_ptr + o, tl.load(x_ptr + o, mask=o < n), mask=o < n)\n"
                      "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        out = x.clone()\n"
                      "        k[(triton.cdiv(out.numel(), 1024),)](out, out.numel(), B=1024)\n        return out\n",
                      "float32"),
}


@pytest.mark.parametrize("case", sorted(NEGATIVE))
def test_honest_pattern_is_clean(case):
    code, dtype = NEGATIVE[case]
    findings = scan_candidate(code, dtype)
    assert findings == [], f"{case}: {_describe(findings)}"


# ---- contract ------------------------------------------------------------------------------------

def test_finding_record():
    findings = scan_candidate("import torch\ntorch.allclose = None\n")
    assert findings == [Finding(flag="monkey_patch", line=2, reason=findings[0].reason)]
    assert findings[0].decisive and not findings[0].conditional and not findings[0].note
    assert findings[0].fallback_lines == ()
    assert dataclasses.is_dataclass(Finding)
    with pytest.raises(dataclasses.FrozenInstanceError):
        findings[0].line = 3  # type: ignore[misc]
    for code, _ in POSITIVE.values():
        for finding in scan_candidate(code):
            assert finding.flag in FLAG_VALUES and isinstance(finding.line, int) and finding.reason
    for case in CONDITIONAL:
        for finding in scan_candidate(_source(case)):
            assert finding.conditional is bool(finding.fallback_lines), finding
            assert all(isinstance(a, int) and isinstance(b, int) and 0 < a <= b for a, b in finding.fallback_lines)


def test_precision_rules_follow_the_problem_dtype():
    half = "def f(a):\n    return a.half()\n"
    assert "precision_downcast" in _flags(half, "float32")
    assert "precision_downcast" in _flags(half, "torch.float32")
    assert "precision_downcast" in _flags("def f(a):\n    return a.float()\n", "float64")
    assert _flags("def f(a):\n    return a.float()\n", "float32") == set()
    assert _flags(half, "float16") == set()
    assert _flags("import triton.language as tl\ndef k(a, b):\n    return tl.dot(a, b)\n", "bfloat16") == set()
    assert "precision_downcast" in _flags("import torch\ndef f(a):\n    return a.to(torch.float8_e5m2)\n", "bfloat16")


@pytest.mark.parametrize("code", [
    "def f(:\n", "class\n", "x = (\n", "\x00", "", "   ", "if True:\npass\n", "lambda: (yield)",
    "def f():\n    return " + "(" * 50 + "1" + ")" * 50 + "\n",
    "x = " + " + ".join(["a"] * 3000) + "\n",
    "from . import Model\nfrom .. import *\n",
    "exec(" + repr("exec(" + repr("import torch\ntorch.allclose = 1") + ")") + ")\n",
    "setattr()\ngetattr()\ntype()\nopen\nos.environ\nimport os\nos.environ[1:2]\nos.environ.update(1)\n",
    "def forward(self):\n    return\nclass A:\n    def forward():\n        return A\n",
    "try:\n    pass\nexcept* ValueError:\n    pass\n",
    "match x:\n    case {'a': 1}:\n        torch.allclose = 1\n",
    "async def f():\n    async with a as b:\n        async for c in d:\n            await e\n",
    "x: int\nclass A(metaclass=B, **kw):\n    y: 'torch.Tensor' = 1\n",
])
def test_odd_code_never_raises(code):
    findings = scan_candidate(code, "float32")
    assert isinstance(findings, list)
    for unusual_dtype in ("", "int8", "torch.bfloat16", None):
        scan_candidate(code, unusual_dtype)  # type: ignore[arg-type]


def test_syntax_error_gives_no_findings():
    assert scan_candidate("import threading\ndef f(:\n") == []


def test_fast_on_a_large_file():
    block = (CORPUS / "honest" / "matmul_blocked.py").read_text()
    big = "\n".join(block.replace("ModelNew", f"ModelNew{i}").replace("_block_size", f"_block_size{i}")
                    for i in range(100))
    start = time.perf_counter()
    assert scan_candidate(big) == []
    assert time.perf_counter() - start < 5.0

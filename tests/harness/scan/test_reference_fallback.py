"""The reference_fallback rule (``hercules.harness.scan.reference_fallback``): fallbacks to PyTorch,
conditional on their lines running.

Each FIRES snippet makes the rule, run alone, raise its flag outright; each CLEAN snippet
sits close to the rule without meeting it, and the whole scan finds nothing in it.

The fallbacks honest while the kernel works are conditional findings; their fallback lines are
checked against what a line tracer records when the candidate really runs, with a build that works
and one that fails.
"""

from __future__ import annotations

import importlib.util
import textwrap
import types
from pathlib import Path

import pytest
from scan_helpers import assert_clean, assert_fires, describe

from hercules.harness.integrity import ExecutedLines
from hercules.harness.scan import lines_executed, scan_candidate
from hercules.harness.scan.reference_fallback import ReferenceFallback


FIRES = {
    # fallbacks that run in C++, where no line of the file can be traced
    "cpp_catch_fallback": ('src = """try { launch(x); } catch (...) { return at::matmul(a, b); }"""\n',
                           "reference_fallback"),
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_rule_fires(case):
    code, flag = FIRES[case]
    assert flag == ReferenceFallback.flag.value
    assert_fires(code, ReferenceFallback)


CLEAN = {
    "import_guard": ("try:\n    import triton\n    import triton.language as tl\n    HAS_TRITON = True\n"
                     "except ImportError:\n    HAS_TRITON = False\n", "float32"),
    "libdevice_guard": ("try:\n    from triton.language.extra import libdevice\nexcept ImportError:\n"
                        "    from triton.language.extra.cuda import libdevice\n", "float32"),
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
}


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_honest_pattern_is_clean(case):
    assert_clean(*CLEAN[case])


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
    # CUDA-L1's common shape: the handler only switches the kernel off, and the code after the try
    # computes the result with PyTorch.
    "handler_falls_through": (False, """
        import torch.nn.functional as F
        class ModelNew:
            def forward(self, x):
                if not self.use_fallback and x.is_cuda:
                    try:
                        return self.ext.forward(x, self.weight)
                    except Exception as e:
                        print(f"kernel failed: {e}")  # fallback
                        self.use_fallback = True  # fallback
                return F.conv2d(x, self.weight)
        """),
    "handler_passes_to_the_fallback_below": (False, """
        import torch.nn.functional as F
        class ModelNew:
            def forward(self, x):
                try:
                    return self.ext.forward(x, self.weight)
                except Exception:
                    pass  # fallback
                return F.conv2d(x, self.weight)
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
    assert len(fallbacks) == 1 and fallbacks[0].conditional and not fallbacks[0].decisive, describe(findings)
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
        assert [(f.flag, f.decisive) for f in findings] == [("reference_fallback", True)], describe(findings)
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
        assert [(f.flag, f.conditional) for f in findings] == [("reference_fallback", True)], describe(findings)


def test_a_conditional_finding_carries_its_lines_and_only_it_does():
    for case in CONDITIONAL:
        for finding in scan_candidate(_source(case)):
            assert finding.conditional is bool(finding.fallback_lines), finding
            assert all(isinstance(a, int) and isinstance(b, int) and 0 < a <= b for a, b in finding.fallback_lines)

"""The global_state rule (``hercules.harness.scan.global_state``): process-wide settings; those that
leave the arithmetic alone are notes.

Each FIRES snippet makes the rule, run alone, raise its flag outright; each CLEAN snippet
sits close to the rule without meeting it, and the whole scan finds nothing in it.
"""

from __future__ import annotations

import pytest
from scan_helpers import assert_clean, assert_fires, describe

from hercules.harness.scan import scan_candidate
from hercules.harness.scan.global_state import GlobalState


FIRES = {
    "backends_alias": ("import torch.backends.cudnn as cudnn\ncudnn.deterministic = False\n", "global_state"),
    "matmul_precision": ("import torch\ntorch.set_float32_matmul_precision('highest')\n", "global_state"),
    "default_dtype": ("import torch\ntorch.set_default_dtype(torch.float64)\n", "global_state"),
    "deterministic": ("import torch\ntorch.use_deterministic_algorithms(True)\n", "global_state"),
    "flush_denormal": ("import torch\ntorch.set_flush_denormal(True)\n", "global_state"),
    "inductor_config": ("import torch._inductor.config as cfg\ncfg.max_autotune = True\n", "global_state"),
    "env_write": ("import os\nos.environ['CUBLAS_WORKSPACE_CONFIG'] = ':4096:8'\n", "global_state"),
    "cpp_global_context": ('src = """at::globalContext().setAllowTF32CuBLAS(true);"""\n', "global_state"),
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_rule_fires(case):
    code, flag = FIRES[case]
    assert flag == GlobalState.flag.value
    assert_fires(code, GlobalState)


CLEAN = {
    "seeding_at_import": ("import torch\ntorch.manual_seed(0)\ntorch.cuda.manual_seed_all(0)\n", "float32"),
    "no_grad_and_compile": ("import torch\nclass ModelNew(torch.nn.Module):\n    @torch.no_grad()\n    def forward(self, x):\n"
                            "        with torch.inference_mode():\n            return torch.compile(torch.relu)(x)\n",
                            "float32"),
}


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_honest_pattern_is_clean(case):
    assert_clean(*CLEAN[case])


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
        ("global_state", 2, True, False, False)], describe(findings)


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

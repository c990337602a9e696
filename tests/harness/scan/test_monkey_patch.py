"""The monkey_patch rule (``hercules.harness.scan.monkey_patch``): replacing torch, the timers, the
builtins or the comparisons, and hooking the interpreter or the dispatcher.

Each FIRES snippet makes the rule, run alone, raise its flag outright; each CLEAN snippet
sits close to the rule without meeting it, and the whole scan finds nothing in it.
"""

from __future__ import annotations

import pytest
from scan_helpers import assert_clean, assert_fires

from hercules.harness.scan.monkey_patch import MonkeyPatch


FIRES = {
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
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_rule_fires(case):
    code, flag = FIRES[case]
    assert flag == MonkeyPatch.flag.value
    assert_fires(code, MonkeyPatch)


CLEAN = {
    "torch_library_custom_op": ("import torch\nlib = torch.library.Library('mylib', 'DEF')\n"
                                "lib.define('f(Tensor x) -> Tensor')\n", "float32"),
    "self_attribute_writes": ("import torch\nclass ModelNew(torch.nn.Module):\n    def __init__(self):\n"
                              "        super().__init__()\n        self.weight = torch.nn.Parameter(torch.ones(3))\n"
                              "        setattr(self, 'bias', None)\n", "float32"),
}


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_honest_pattern_is_clean(case):
    assert_clean(*CLEAN[case])

"""The input_mutated rule (``hercules.harness.scan.input_mutated``): the forward inputs modified in
place.

Each FIRES snippet makes the rule, run alone, raise its flag outright; each CLEAN snippet
sits close to the rule without meeting it, and the whole scan finds nothing in it.
"""

from __future__ import annotations

import pytest
from scan_helpers import assert_clean, assert_fires

from hercules.harness.scan.input_mutated import InputMutated


FIRES = {
    "mutates_input": ("class M:\n    def forward(self, x):\n        x.mul_(2)\n        return x * 1\n", "input_mutated"),
    "mutates_via_contiguous": ("class M:\n    def forward(self, x):\n        x = x.contiguous()\n"
                               "        x[0] = 1\n        return x + 0\n", "input_mutated"),
    "mutates_out_kw": ("import torch\nclass M:\n    def forward(self, x, y):\n        torch.add(x, y, out=y)\n"
                       "        return y + 0\n", "input_mutated"),
    "mutates_through_submodule": (
        "import torch.nn as nn\nclass Scale(nn.Module):\n    def forward(self, t):\n        t.mul_(2)\n        return t * 1\n"
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.scale = Scale()\n"
        "    def forward(self, x):\n        return self.scale(x)\n", "input_mutated"),
    "mutates_through_method": (
        "class ModelNew:\n    def forward(self, x):\n        self._scratch(x)\n        return x * 1\n"
        "    def _scratch(self, t):\n        t[0] = 0\n", "input_mutated"),
    "mutates_augassign": ("class M:\n    def forward(self, x):\n        n = x.shape[0]\n        x += 1\n"
                          "        return x * n\n", "input_mutated"),
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_rule_fires(case):
    code, flag = FIRES[case]
    assert flag == InputMutated.flag.value
    assert_fires(code, InputMutated)


CLEAN = {
    "inplace_on_output": ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x, y):\n"
                          "        x = x.contiguous()\n        out = x * 2\n        out.add_(y)\n        out[0] = 0\n"
                          "        return out\n", "float32"),
    "rebound_input": ("class ModelNew:\n    def forward(self, x):\n        x = x.clone()\n        x.mul_(2)\n"
                      "        return x\n", "float32"),
    "int_param_augassign": ("class ModelNew:\n    def forward(self, x, dim):\n        dim += 1\n"
                            "        return x.sum(dim)\n", "float32"),
    "submodule_updates_an_intermediate": (
        "import torch.nn as nn\nclass AddBias(nn.Module):\n    def forward(self, t):\n        t += self.b\n        return t\n"
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.add = AddBias()\n"
        "    def forward(self, x):\n        y = self.lin(x)\n        return self.add(y)\n", "float32"),
}


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_honest_pattern_is_clean(case):
    assert_clean(*CLEAN[case])

"""The result_cache rule (``hercules.harness.scan.result_cache``): outputs kept across calls, keyed by
pointer, id or shape, or memoised.

Each FIRES snippet makes the rule, run alone, raise its flag outright; each CLEAN snippet
sits close to the rule without meeting it, and the whole scan finds nothing in it.
"""

from __future__ import annotations

import pytest
from scan_helpers import assert_clean, assert_fires

from hercules.harness.scan.result_cache import ResultCache


FIRES = {
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
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_rule_fires(case):
    code, flag = FIRES[case]
    assert flag == ResultCache.flag.value
    assert_fires(code, ResultCache)


CLEAN = {
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
}


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_honest_pattern_is_clean(case):
    assert_clean(*CLEAN[case])

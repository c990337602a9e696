"""The swallowed_exception rule (``hercules.harness.scan.swallowed_exception``): exceptions hidden on
the forward path.

Each FIRES snippet makes the rule, run alone, raise its flag outright; each CLEAN snippet
sits close to the rule without meeting it, and the whole scan finds nothing in it.
"""

from __future__ import annotations

import pytest
from scan_helpers import assert_clean, assert_fires

from hercules.harness.scan import scan_candidate
from hercules.harness.scan.swallowed_exception import SwallowedException


FIRES = {
    "swallowed_pass": ("import torch\nclass M:\n    def forward(self, x):\n        out = torch.empty_like(x)\n"
                       "        try:\n            kernel(x, out)\n        except Exception:\n            pass\n"
                       "        return out\n", "swallowed_exception"),
    "suppress": ("import contextlib, torch\nclass M:\n    def forward(self, x):\n        out = torch.empty_like(x)\n"
                 "        with contextlib.suppress(Exception):\n            kernel(x, out)\n        return out\n",
                 "swallowed_exception"),
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_rule_fires(case):
    code, flag = FIRES[case]
    assert flag == SwallowedException.flag.value
    assert_fires(code, SwallowedException)


CLEAN = {
    "reraise": ("class M:\n    def forward(self, x):\n        try:\n            return kernel(x)\n"
                "        except RuntimeError as exc:\n            raise RuntimeError('kernel failed') from exc\n", "float32"),
}


@pytest.mark.parametrize("case", sorted(CLEAN))
def test_honest_pattern_is_clean(case):
    assert_clean(*CLEAN[case])


def test_a_handler_that_falls_through_to_a_fallback_is_not_a_swallowed_exception():
    # The failure is not hidden: the result is computed another way after the try (a fallback,
    # conditional on the handler's lines running); returning the buffer the kernel was to fill is.
    code = ("import torch\nclass M:\n    def forward(self, x):\n        out = torch.empty_like(x)\n"
            "        try:\n            self._kernel(x, out)\n        except Exception:\n            pass\n"
            "        return {}\n")
    assert [(f.flag, f.conditional) for f in scan_candidate(code.format("torch.relu(x)"))] == [
        ("reference_fallback", True)]
    assert [(f.flag, f.decisive) for f in scan_candidate(code.format("out"))] == [("swallowed_exception", True)]

"""Static evidence from a candidate's source, gathered without running it.

``scan_candidate`` reads the Python source with ``ast`` (and the CUDA/C++ sources embedded in its
string literals with regular expressions) and reports the patterns of the threats in docs/design.md,
one rule per threat (``registry.RULES``, a module each), all served by one walk of the tree
(``walker``) over facts gathered once (``context``). Each finding names a ``Flag`` value, a line
and a reason.

The rules are written to be precise rather than broad: an honest kernel (PyTorch, Triton or
``load_inline`` CUDA, compute on the current stream, outputs allocated per call, kernels or configs
cached by shape) gets no finding. The dynamic checks remain the judge of behaviour: where one
judges a rule's threat on the evaluation's device (``Rule.covered_by``), the rule's findings are
hints, said in the verdict and never a flag by themselves (``decide`` applies this); the others
are flags, as the source is the only evidence of their threat.

Three kinds of finding. Most are flags. A fallback that is honest while the kernel works is
*conditional*: it carries the candidate's own lines of the fallback (``fallback_lines``), and is a
flag only if one of them runs (``lines_executed`` over the lines an ``integrity.ExecutedLines``
tracer recorded, from the import on). A process-local setting that leaves the arithmetic alone
(``cudnn.benchmark``, ``torch.set_num_threads``) is a *note*: reported, never a flag.

Never raises: a syntax error gives no findings (the build reports it), and any internal failure
returns what was found until then.
"""

from __future__ import annotations

from hercules import pyparse
from hercules.harness.scan.finding import Finding, lines_executed
from hercules.harness.scan.registry import RULES, dynamic_check_for, rule_for
from hercules.harness.scan.rule import DynamicCheck, Rule
from hercules.harness.scan.walker import scan_tree

__all__ = ["RULES", "DynamicCheck", "Finding", "Rule", "dynamic_check_for", "lines_executed", "rule_for",
           "scan_candidate"]


def scan_candidate(code: str, problem_dtype: str = "float32") -> list[Finding]:
    """Static findings for one candidate source, sorted by line; [] when it does not parse."""
    try:
        tree = pyparse.parse(code)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return []
    return scan_tree(tree, problem_dtype, RULES)

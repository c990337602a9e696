"""``ast.parse`` for code parsed by threads of one process (evaluations in flight in a bench, serve
or an executor each scan their candidate and read their problem).

CPython 3.11 keeps the AST constructor's recursion depth in state shared by every thread of the
interpreter; a thread switch inside one parse (a garbage collection running finalizers can give
the interpreter lock away) lets another thread's parse move that depth, and the first one raises
``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905). Seen once in a
CPU CI run: two evaluations of a two-worker executor scanned at once, and an honest candidate's
evaluation failed and was retried. Parses here hold one lock: a candidate's parse takes
milliseconds.
"""

from __future__ import annotations

import ast
import threading

_PARSING = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, one thread of this process at a time."""
    with _PARSING:
        return ast.parse(source, filename)

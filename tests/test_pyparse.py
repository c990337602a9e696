"""Parses one thread at a time (CPython 3.11's shared AST recursion depth, python/cpython#106905)."""

from __future__ import annotations

import ast
import re
import threading
from pathlib import Path

from hercules import pyparse

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "hercules"
# Runs in a process of its own (the debugging benchmark's def.py driver), never beside a scan.
OWN_PROCESS = {"debug/defpy_driver.py"}


def test_a_parse_waits_while_another_thread_parses():
    started, finished = threading.Event(), threading.Event()
    trees = []

    def parse():
        started.set()
        trees.append(pyparse.parse("x = 1\n"))
        finished.set()

    with pyparse._PARSING:  # another thread's parse in progress
        thread = threading.Thread(target=parse)
        thread.start()
        assert started.wait(10)
        assert not finished.wait(0.3), "the parse went on while another held the parser"
    assert finished.wait(10)
    thread.join(10)
    assert isinstance(trees[0], ast.Module) and isinstance(trees[0].body[0], ast.Assign)


def test_the_package_parses_python_only_through_pyparse():
    direct = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                    if path.name != "pyparse.py" and re.search(r"\bast\.parse\(", path.read_text()))
    assert set(direct) <= OWN_PROCESS, direct

"""The background_thread rule (``hercules.harness.scan.background_thread``): threads and processes, in
Python and in C++.

Each FIRES snippet makes the rule, run alone, raise its flag outright; each CLEAN snippet
sits close to the rule without meeting it, and the whole scan finds nothing in it.
"""

from __future__ import annotations

import pytest
from scan_helpers import assert_fires

from hercules.harness.scan.background_thread import BackgroundThread


FIRES = {
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
}


@pytest.mark.parametrize("case", sorted(FIRES))
def test_rule_fires(case):
    code, flag = FIRES[case]
    assert flag == BackgroundThread.flag.value
    assert_fires(code, BackgroundThread)

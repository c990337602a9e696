"""The measured processes' priority while they hold the device alone (harness/priority.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from hercules.harness import priority

# A process with a child, each with a second thread: the boost must reach every thread of both.
TREE = """
import subprocess, sys, threading, time
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
if sys.argv[1] == "parent":
    subprocess.Popen([sys.executable, "-c", sys.argv[2], "child", sys.argv[2]])
print("up", flush=True)
time.sleep(60)
"""


def _all_threads(root: int) -> list[int]:
    return priority.threads(priority.descendants(root))


def _wait_for(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _kill_tree(proc: subprocess.Popen) -> None:
    for pid in reversed(priority.descendants(proc.pid)):
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    proc.wait()


@pytest.fixture()
def tree():
    proc = subprocess.Popen([sys.executable, "-c", TREE, "parent", TREE], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        # the parent's two threads and the child's two
        _wait_for(lambda: len(_all_threads(proc.pid)) >= 4)
        yield proc
    finally:
        _kill_tree(proc)


def test_every_thread_of_the_tree_is_boosted_and_restored(tree):
    if os.geteuid() != 0:
        pytest.skip("raising priority needs CAP_SYS_NICE")
    # Whatever niceness the tests run at (``nice pytest`` included) is what comes back afterwards.
    start = os.getpriority(os.PRIO_PROCESS, 0)
    tids = _all_threads(tree.pid)
    assert {os.getpriority(os.PRIO_PROCESS, t) for t in tids} == {start}
    with priority.boosted([tree.pid]) as took:
        assert took
        assert {os.getpriority(os.PRIO_PROCESS, t) for t in _all_threads(tree.pid)} == {priority.BOOST_NICE}
        assert os.getpriority(os.PRIO_PROCESS, 0) == priority.BOOST_NICE  # the measuring thread too
    assert {os.getpriority(os.PRIO_PROCESS, t) for t in _all_threads(tree.pid)} == {start}
    assert os.getpriority(os.PRIO_PROCESS, 0) == start


def test_without_the_privilege_nothing_changes_and_it_says_so(tree):
    # A child of this test without CAP_SYS_NICE (dropped by util-linux's setpriv when root) tries
    # to boost the tree: refused, and it says so.
    code = f"from hercules.harness import priority\nwith priority.boosted([{tree.pid}]) as took: print(took)"
    command = [sys.executable, "-c", code]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv (util-linux) is needed to drop CAP_SYS_NICE as root")
        command = ["setpriv", "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", "--", *command]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == "False"
    assert {os.getpriority(os.PRIO_PROCESS, t) for t in _all_threads(tree.pid)} == {os.getpriority(os.PRIO_PROCESS, 0)}


def test_a_workers_cpu_group_is_weighted_as_one_boosted_task_while_measuring_and_back_after(tree):
    from hercules.harness.sandbox import DEFAULT_CPU_SHARES, CpuGroup, cpu_weight_settings

    group = CpuGroup.make("test")
    if group is None:
        pytest.skip("this host lets this process make no cpu cgroup")
    try:
        assert group.add(tree.pid)
        assert str(tree.pid) in (group.path / "cgroup.procs").read_text().split()

        def shares() -> dict[str, str]:
            return {key: (group.path / key).read_text().strip() for key in cpu_weight_settings(1)
                    if (group.path / key).exists()}

        assert shares() == {k: v for k, v in cpu_weight_settings(DEFAULT_CPU_SHARES).items() if k in shares()}
        with priority.boosted([tree.pid], include_current_thread=False, groups=[group]):
            assert shares() == {k: v for k, v in cpu_weight_settings(priority.BOOST_SHARES).items() if k in shares()}
        assert shares() == {k: v for k, v in cpu_weight_settings(DEFAULT_CPU_SHARES).items() if k in shares()}
    finally:
        _kill_tree(tree)
        _wait_for(lambda: not (group.path / "cgroup.procs").read_text().split())
        group.remove()
    assert not group.path.exists()

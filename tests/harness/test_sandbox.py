"""The sandbox with real processes and the real bwrap: what the inside cannot reach, that bombs end
with a recorded breach, that nothing outlives the sandbox, and that a torch worker still runs.
Each guarantee is checked beside an unsandboxed control where one makes sense, so a test would
fail without the sandbox rather than pass for some other reason."""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest

from hercules.harness import sandbox as sandbox_module
from hercules.harness.sandbox import Sandbox, SandboxInfo, SandboxLimits, probe, warn_if_unsandboxed

PACKAGE_ROOT = Path(sandbox_module.__file__).resolve().parents[2]
SANDBOX_FILE = Path(sandbox_module.__file__).resolve()

needs_bwrap = pytest.mark.skipif(probe().mechanism == "none", reason=f"no usable bubblewrap: {probe().reason}")


def run_inside(box: Sandbox, code: str, *args: str, timeout: float = 60) -> tuple[int, str, str]:
    p = box.popen([sys.executable, "-c", textwrap.dedent(code), *args], env=dict(os.environ),
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        box.kill()
    return p.returncode, out.decode(), err.decode()


def run_plain(code: str, *args: str) -> tuple[int, str, str]:
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def wait_until(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def find_by_marker(box: Sandbox, marker: bytes) -> int | None:
    """The host pid of the process inside whose command line carries marker."""
    for pid in box.processes():
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                return pid
        except OSError:
            pass
    return None


def host_process_count() -> int:
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


# --- the processes outside ---------------------------------------------------------------------

REACH = """
import json, os, sys
report = {"ppid": os.getppid(), "proc": sorted(int(n) for n in os.listdir("/proc") if n.isdigit())}
for pid in map(int, sys.argv[1:]):
    try:
        os.kill(pid, 0)
        report[str(pid)] = "signalled"
    except ProcessLookupError:
        report[str(pid)] = "no such process"
    except PermissionError:
        report[str(pid)] = "denied"
    report[f"{pid}_proc_visible"] = os.path.exists(f"/proc/{pid}/environ")
print(json.dumps(report))
"""


@needs_bwrap
def test_inside_cannot_see_or_signal_the_parent_or_a_sibling_worker(tmp_path):
    sibling = Sandbox(tmp_path / "sibling")
    sleeper = sibling.popen([sys.executable, "-c", "import time; time.sleep(60)", "sibling-marker"],
                            env=dict(os.environ))
    try:
        assert wait_until(lambda: find_by_marker(sibling, b"sibling-marker") is not None)
        sibling_pid = find_by_marker(sibling, b"sibling-marker")  # the sleeping python, not bwrap's init
        targets = [str(os.getpid()), str(sibling_pid)]

        rc, out, err = run_inside(Sandbox(tmp_path / "box"), REACH, *targets)
        assert rc == 0, err
        inside = json.loads(out)
        assert inside["ppid"] == 1  # its parent is the sandbox's own init, not this process
        assert all(pid < 10 for pid in inside["proc"])  # /proc shows the sandbox's processes only
        for pid in targets:
            assert inside[pid] == "no such process"
            assert inside[f"{pid}_proc_visible"] is False

        rc, out, err = run_plain(REACH, *targets)  # control: the same code unsandboxed reaches both
        assert rc == 0, err
        outside = json.loads(out)
        assert outside[targets[0]] == "signalled" and outside[f"{targets[0]}_proc_visible"] is True
        assert outside[targets[1]] == "signalled"
    finally:
        sibling.kill()
    assert sleeper.returncode is not None


# --- the filesystem ----------------------------------------------------------------------------

FILES = """
import json, os, sys
report = {}
for path in sys.argv[1].split(","):
    try:
        with open(path) as f:
            report["read " + path] = f.read()
    except OSError as exc:
        report["read " + path] = type(exc).__name__
for path in sys.argv[2].split(","):
    try:
        with open(path, "w") as f:
            f.write("written inside")
        report["write " + path] = "ok"
    except OSError as exc:
        report["write " + path] = type(exc).__name__
print(json.dumps(report))
"""


def outside_secret() -> Path | None:
    """A file in /root or /work: neither is bound, so the inside must not read it."""
    for folder in (Path.home(), Path("/work")):
        try:
            fd, name = tempfile.mkstemp(prefix=".hercules-sandbox-secret-", dir=folder)
        except OSError:
            continue
        os.write(fd, b"outside secret")
        os.close(fd)
        return Path(name)
    return None


@needs_bwrap
def test_filesystem_reads_only_the_binds_and_writes_only_the_private_and_writable_paths(tmp_path):
    package = tmp_path / "package"
    (package / "runs" / "cache" / "entry").mkdir(parents=True)
    (package / "module.py").write_text("public")
    (package / "problem.py").write_text("the problem")
    (package / "runs" / "secret.txt").write_text("a verdict")
    writable = tmp_path / "writable"
    writable.mkdir()
    entry = package / "runs" / "cache" / "entry"
    secret = outside_secret()
    private = tmp_path / "private"

    reads = [package / "module.py", package / "problem.py", package / "runs" / "secret.txt"]
    reads += [secret] if secret else []
    writes = [private / "out.txt", writable / "out.txt", entry / "out.txt", package / "new.txt",
              package / "runs" / "new.txt", Path("/usr/new.txt"), Path("/new.txt"), Path("/etc/new.txt"),
              Path("/proc/sys/kernel/printk_ratelimit_burst")]
    box = Sandbox(private, readable=[package], writable=[writable, entry],
                  hidden=[package / "runs", package / "problem.py"])
    try:
        rc, out, err = run_inside(box, FILES, ",".join(map(str, reads)), ",".join(map(str, writes)))
        assert rc == 0, err
        inside = json.loads(out)
        assert inside[f"read {package / 'module.py'}"] == "public"  # the readable package is there
        assert inside[f"read {package / 'problem.py'}"] == "PermissionError"  # a hidden file: /dev/null, nodev
        assert inside[f"read {package / 'runs' / 'secret.txt'}"] == "FileNotFoundError"  # hidden folder
        if secret:
            assert inside[f"read {secret}"] == "FileNotFoundError"  # outside every bind
        assert inside[f"write {private / 'out.txt'}"] == "ok"
        assert inside[f"write {writable / 'out.txt'}"] == "ok"
        assert inside[f"write {entry / 'out.txt'}"] == "ok"  # writable under a hidden folder stays visible
        for path in writes[3:]:
            assert inside[f"write {path}"] in ("OSError", "PermissionError", "FileNotFoundError"), path
        assert (entry / "out.txt").read_text() == "written inside"
        assert not (package / "new.txt").exists()

        # Control: unsandboxed, the same code reads the secrets and writes where the sandbox refused.
        rc, out, err = run_plain(FILES, ",".join(map(str, reads)), str(package / "new.txt"))
        outside = json.loads(out)
        assert outside[f"read {package / 'runs' / 'secret.txt'}"] == "a verdict"
        assert outside[f"read {package / 'problem.py'}"] == "the problem"
        if secret:
            assert outside[f"read {secret}"] == "outside secret"
        assert outside[f"write {package / 'new.txt'}"] == "ok"
    finally:
        if secret:
            secret.unlink()


@needs_bwrap
def test_tmp_is_private_to_the_sandbox(tmp_path):
    marker = f"hercules-sandbox-{os.getpid()}-{time.monotonic_ns()}"
    rc, out, err = run_inside(Sandbox(tmp_path / "box"), f"""
        import os
        open("/tmp/{marker}", "w").write("x")
        print(sorted(os.listdir("/tmp")))
    """)
    assert rc == 0, err
    assert marker in out
    assert not Path("/tmp", marker).exists()


def test_home_is_the_private_folder_with_the_folders_a_users_home_has():
    # An extension built into ~/.cache/torch_extensions (CUDA-L1, level 1 #35) finds the folder.
    import tempfile

    with tempfile.TemporaryDirectory() as private:
        rc, out, err = run_inside(Sandbox(Path(private)), """
            import os
            home = os.path.expanduser("~")
            print(home, os.path.isdir(os.path.join(home, ".cache", "torch_extensions")))
        """)
        assert rc == 0, err
        assert out.split() == [private, "True"]


# --- the network -------------------------------------------------------------------------------

CONNECT = """
import json, socket, sys
report = {}
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        report[target] = "connected"
    except OSError as exc:
        report[target] = type(exc).__name__
print(json.dumps(report))
"""


@needs_bwrap
def test_no_network_not_even_the_hosts_loopback(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    local = f"127.0.0.1:{server.getsockname()[1]}"
    try:
        rc, out, err = run_inside(Sandbox(tmp_path / "box"), CONNECT, local, "1.1.1.1:53")
        assert rc == 0, err
        inside = json.loads(out)
        assert inside[local] != "connected"
        assert inside["1.1.1.1:53"] != "connected"
        rc, out, err = run_plain(CONNECT, local)  # control: the host's own loopback answers outside
        assert json.loads(out)[local] == "connected"
    finally:
        server.close()


# --- limits ------------------------------------------------------------------------------------

FORK_BOMB = """
import os, time
while True:
    try:
        os.fork()
    except OSError:
        pass
    time.sleep(0.02)
"""


@needs_bwrap
def test_fork_bomb_ends_with_a_breach_and_leaves_the_host_alone(tmp_path):
    before = host_process_count()
    limits = dataclasses.replace(SandboxLimits.default(), processes=64)
    box = Sandbox(tmp_path / "box", limits=limits)
    started = time.monotonic()
    p = box.popen([sys.executable, "-c", FORK_BOMB], env=dict(os.environ))
    p.wait(timeout=30)
    box.kill()
    assert time.monotonic() - started < 15
    assert box.breach and "over the bound of 64" in box.breach
    assert box.processes() == [] and not box.alive()
    assert wait_until(lambda: host_process_count() < before + 20)


MEMORY_BOMB = """
import sys, time
chunks = []
for _ in range(int(sys.argv[1]) // 50):
    chunks.append(b"\\x01" * (50 << 20))  # written, so resident
    time.sleep(0.01)
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0)  # held: a watchdog that polls sees it whatever the load
print("allocated", len(chunks) * 50, "MB")
"""


@needs_bwrap
def test_memory_bomb_ends_with_a_breach_and_an_honest_allocation_does_not(tmp_path):
    limits = dataclasses.replace(SandboxLimits.default(), memory_bytes=300 * 10**6)
    box = Sandbox(tmp_path / "bomb", limits=limits)
    rc, out, _ = run_inside(box, MEMORY_BOMB, "1000")
    assert rc == -signal.SIGKILL
    assert "allocated" not in out
    assert box.breach and "host memory" in box.breach and "0.3 GB bound" in box.breach

    honest = Sandbox(tmp_path / "honest", limits=limits)  # control: 150 MB under the same bound
    rc, out, err = run_inside(honest, MEMORY_BOMB, "150")
    assert rc == 0, err
    assert "allocated 150 MB" in out and honest.breach is None


@needs_bwrap
def test_rlimits_are_set_inside(tmp_path):
    limits = SandboxLimits(memory_bytes=8 << 30, processes=100, open_files=123, file_size_bytes=10**7)
    rc, out, err = run_inside(Sandbox(tmp_path / "box", limits=limits), """
        import errno, json, resource as r
        report = {name: r.getrlimit(getattr(r, name))[0]
                  for name in ("RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NPROC")}
        try:
            with open("big", "wb") as f:
                f.write(b"x" * 2 * 10**7)
        except OSError as exc:
            report["write"] = errno.errorcode[exc.errno]
        print(json.dumps(report))
    """)
    assert rc == 0, err
    assert json.loads(out) == {"RLIMIT_NOFILE": 123, "RLIMIT_FSIZE": 10**7, "RLIMIT_CORE": 0,
                               "RLIMIT_NPROC": 116, "write": "EFBIG"}  # Python ignores SIGXFSZ


# --- every process ends with the sandbox -------------------------------------------------------

ESCAPE = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)", "escapee-marker"])
    os._exit(0)
os.wait()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
"""


def escapee(box: Sandbox) -> int | None:
    return find_by_marker(box, b"escapee-marker")


@needs_bwrap
def test_setsid_double_fork_child_is_gone_after_kill(tmp_path):
    box = Sandbox(tmp_path / "box")
    p = box.popen([sys.executable, "-c", ESCAPE, str(tmp_path / "never")], env=dict(os.environ))
    assert wait_until(lambda: escapee(box) is not None)
    pid = escapee(box)
    assert p.poll() is None
    box.kill()
    assert gone(pid) and p.returncode is not None
    assert box.processes() == [] and not box.alive()
    box.kill()  # idempotent


@needs_bwrap
def test_setsid_double_fork_child_is_gone_when_the_command_exits(tmp_path):
    box = Sandbox(tmp_path / "box")
    go = tmp_path / "box" / "go"
    p = box.popen([sys.executable, "-c", ESCAPE, str(go)], env=dict(os.environ))
    assert wait_until(lambda: escapee(box) is not None)
    pid = escapee(box)
    go.touch()
    assert p.wait(timeout=10) == 0
    assert wait_until(lambda: gone(pid), timeout=2)  # the namespace ended with its command
    box.kill()


OWNER = """
import json, os, sys, time
from pathlib import Path
from hercules.harness.sandbox import Sandbox
box = Sandbox(Path(sys.argv[1]))
box.popen([sys.executable, "-c", "import time; time.sleep(120)"], env=dict(os.environ))
while len(box.processes()) < 2:
    time.sleep(0.01)
print(json.dumps(box.processes()), flush=True)
time.sleep(120)
"""


@needs_bwrap
def test_sigkill_of_the_owning_process_leaves_nothing_alive(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT))
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path / "box")], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        inside = json.loads(owner.stdout.readline())
        assert len(inside) >= 2 and not any(gone(pid) for pid in inside)
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=10)
        assert wait_until(lambda: all(gone(pid) for pid in inside), timeout=5), inside
    finally:
        owner.kill()
        owner.wait()


@needs_bwrap
def test_a_temp_folder_on_sys_path_does_not_show_the_sandbox_the_temp_root(tmp_path, monkeypatch):
    # `python /tmp/script.py` puts /tmp on sys.path; other candidates' private folders live there.
    neighbour = Path(tempfile.mkdtemp(prefix="hercules-candidate-"))
    try:
        (neighbour / "candidate.py").write_text("another candidate's code")
        monkeypatch.setattr(sys, "path", [tempfile.gettempdir(), *sys.path])
        box = Sandbox(tmp_path / "private")
        rc, out, err = run_inside(box, FILES, str(neighbour / "candidate.py"), "")
        assert rc == 0, err
        assert json.loads(out)[f"read {neighbour / 'candidate.py'}"] == "FileNotFoundError"
    finally:
        shutil.rmtree(neighbour, ignore_errors=True)


def test_sandbox_started_from_a_thread_that_ends_lives_on(tmp_path):
    # The parent-death signal follows the thread that forked bwrap; without the spawner thread the
    # sandbox died when this short-lived thread returned.
    box = Sandbox(tmp_path / "box")
    started: list[subprocess.Popen] = []
    thread = threading.Thread(target=lambda: started.append(
        box.popen([sys.executable, "-c", "import time; time.sleep(60)"], env=dict(os.environ))))
    thread.start()
    thread.join()
    time.sleep(0.5)
    try:
        assert started[0].poll() is None and box.alive()
    finally:
        box.kill()


# --- what a worker needs still works -----------------------------------------------------------

@needs_bwrap
def test_a_torch_worker_runs_inside(tmp_path):
    box = Sandbox(tmp_path / "box", readable=[PACKAGE_ROOT], gpu=True)
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT))
    p = box.popen([sys.executable, "-c", "import torch, hercules; print(torch.ones(2).sum().item())"], env=env,
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=120)
    box.kill()
    assert p.returncode == 0, err.decode()
    assert out.decode().strip() == "2.0"
    assert box.breach is None


@needs_bwrap
def test_exit_status_and_signals_read_as_from_a_plain_child(tmp_path):
    assert run_inside(Sandbox(tmp_path / "a"), "import os; os._exit(3)")[0] == 3
    assert run_inside(Sandbox(tmp_path / "b"), "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")[0] == -11


@needs_bwrap
def test_compilers_active_sees_a_build_tool_by_name(tmp_path):
    private = tmp_path / "box"
    private.mkdir()
    (private / "nvcc").symlink_to(shutil.which("sleep"))
    box = Sandbox(private)
    box.popen([str(private / "nvcc"), "30"], env=dict(os.environ))
    try:
        assert wait_until(box.compilers_active, timeout=5)
    finally:
        box.kill()
    plain = Sandbox(tmp_path / "plain")  # control: a sleep under its own name is no compiler
    plain.popen(["sleep", "30"], env=dict(os.environ))
    try:
        assert wait_until(lambda: len(plain.processes()) >= 2)
        assert not plain.compilers_active()
    finally:
        plain.kill()
    assert sandbox_module._is_compiler("x86_64-linux-gnu-g++") and sandbox_module._is_compiler("gcc-12")
    assert not sandbox_module._is_compiler("python3")


def test_probe_and_info_are_json_ready():
    info = probe()
    assert isinstance(info, SandboxInfo) and probe() is info  # checked once per process
    json.dumps(dataclasses.asdict(info))
    if info.mechanism != "none":
        assert info.mechanism.startswith("bubblewrap ")
        assert {"pid", "mount", "network", "ipc", "user", "rlimits", "watchdog"} <= set(info.isolated)


# --- without bubblewrap ------------------------------------------------------------------------

@pytest.fixture
def fresh_probe(monkeypatch):
    sandbox_module._probe.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    sandbox_module._probe.cache_clear()


def test_fallback_without_bwrap_is_marked_warned_once_and_still_kills_the_tree(tmp_path, fresh_probe):
    fresh_probe.setenv("HERCULES_BWRAP", str(tmp_path / "no-bwrap"))
    fresh_probe.setattr(sandbox_module, "_warned", False)
    info = probe()
    assert info.mechanism == "none" and "not found" in info.reason
    assert "pid" in info.missing and "watchdog" in info.isolated
    with pytest.warns(RuntimeWarning, match="UNSANDBOXED"):
        warn_if_unsandboxed(info)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_unsandboxed(info)  # once per process

    box = Sandbox(tmp_path / "box")
    assert box.info.mechanism == "none"
    p = box.popen([sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"],
                  env=dict(os.environ))
    assert wait_until(lambda: len(box.processes()) >= 2)
    inside = box.processes()
    box.kill()
    assert all(gone(pid) for pid in inside) and p.returncode == -signal.SIGKILL


def test_fallback_watchdog_still_bounds_memory(tmp_path, fresh_probe):
    fresh_probe.setenv("HERCULES_BWRAP", str(tmp_path / "no-bwrap"))
    box = Sandbox(tmp_path / "box", limits=dataclasses.replace(SandboxLimits.default(), memory_bytes=300 * 10**6))
    # The watchdog polls: on the loaded 2-core machine the bomb once reached its 1000 MB and ended
    # before a poll saw it; holding its memory for 30 s leaves the bound to the watchdog, not the race.
    rc, out, _ = run_inside(box, MEMORY_BOMB, "1000", "30")
    assert rc == -signal.SIGKILL and "allocated" not in out
    assert box.breach and "host memory" in box.breach


def test_probe_reports_a_bwrap_that_cannot_start_namespaces(tmp_path, fresh_probe):
    fake = tmp_path / "bwrap"
    fake.write_text(textwrap.dedent("""\
        #!/bin/sh
        case "$1" in
          --version) echo "bubblewrap 0.8.0" ;;
          --help) echo "--disable-userns --size --info-fd --die-with-parent --cap-drop" ;;
          *) echo "bwrap: No permissions to create new namespace" >&2; exit 1 ;;
        esac
    """))
    fake.chmod(0o755)
    fresh_probe.setenv("HERCULES_BWRAP", str(fake))
    info = probe()
    assert info.mechanism == "none"
    assert "cannot start its namespaces" in info.reason and "No permissions" in info.reason


# --- unprivileged ------------------------------------------------------------------------------

UNPRIVILEGED = """
import importlib.util, json, os, sys, tempfile, time
from pathlib import Path
spec = importlib.util.spec_from_file_location("sandbox_under_test", sys.argv[1])
sandbox = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = sandbox
spec.loader.exec_module(sandbox)
report = {"uid": os.getuid(), "info": sandbox.probe().__dict__}
box = sandbox.Sandbox(Path(tempfile.mkdtemp()))
code = "import os, sys; os.kill(int(sys.argv[1]), 0)"
p = box.popen([sys.executable, "-c", code, sys.argv[2]], env=dict(os.environ))
report["kill_outside_rc"] = p.wait(timeout=30)
box.kill()
limits = sandbox.SandboxLimits(memory_bytes=2 << 30, processes=32, open_files=256, file_size_bytes=1 << 20)
bomb = sandbox.Sandbox(Path(tempfile.mkdtemp()), limits=limits)
p = bomb.popen([sys.executable, "-c", sys.argv[3]], env=dict(os.environ))
p.wait(timeout=30)
bomb.kill()
report["bomb_breach"] = bomb.breach
print(json.dumps(report))
"""


@needs_bwrap
@pytest.mark.skipif(os.getuid() != 0, reason="already unprivileged: every other test runs as a user")
def test_works_as_an_ordinary_user():
    try:
        pwd.getpwnam("hbuser")
    except KeyError:
        pytest.skip("no user hbuser")
    runuser = shutil.which("runuser")
    python = "/usr/bin/python3"
    if not runuser or not os.access(python, os.X_OK):
        pytest.skip("needs runuser and a system python3")
    readable = subprocess.run([runuser, "-u", "hbuser", "--", "test", "-r", str(SANDBOX_FILE)])
    if readable.returncode != 0:
        pytest.skip(f"hbuser cannot read {SANDBOX_FILE}")
    result = subprocess.run(
        [runuser, "-u", "hbuser", "--", python, "-c", UNPRIVILEGED, str(SANDBOX_FILE), str(os.getpid()), FORK_BOMB],
        capture_output=True, text=True, timeout=120, cwd="/", env={"PATH": os.environ["PATH"]})
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["uid"] != 0
    assert report["info"]["mechanism"].startswith("bubblewrap") and report["info"]["missing"] == []
    assert report["kill_outside_rc"] == 1  # ProcessLookupError: this process does not exist inside
    # As a user the kernel holds the bomb at RLIMIT_NPROC (32 + 16); the watchdog still reports it.
    assert report["bomb_breach"] and "over the bound of 32" in report["bomb_breach"]


def _cgroups_of(box: Sandbox) -> set[str]:
    return set(box._cgroups.paths) if box._cgroups is not None else set()


@needs_bwrap
def test_the_command_is_inside_the_sandboxs_cgroups_before_its_first_instruction(tmp_path):
    # The command forks at once: a child forked before the parent moved the sandbox into its
    # cgroups would be outside them (the race --block-fd closes).
    box = Sandbox(tmp_path / "box")
    p = box.popen([sys.executable, "-c", "import os, time\nif os.fork() == 0:\n    time.sleep(30)\nelse:\n    time.sleep(30)"],
                  env=dict(os.environ))
    try:
        assert wait_until(lambda: len(box._members()) >= 3)  # init, the command and its child
        if not _cgroups_of(box):
            pytest.skip("this host lets this process make no cgroup")
        for pid in box._members():
            membership = Path(f"/proc/{pid}/cgroup").read_text()
            for controller, path in box._cgroups.paths.items():
                assert path.name in membership, (pid, controller, membership)
    finally:
        box.kill()
    assert p.returncode == -signal.SIGKILL


def _ran_once(folder: Path) -> Sandbox:
    """A sandbox that has run one short command (its cgroups are made at its first start)."""
    box = Sandbox(folder)
    p = box.popen([sys.executable, "-c", "pass"], env=dict(os.environ))
    try:
        p.wait(timeout=60)
    finally:
        box.kill()
    return box


def test_each_controller_is_either_a_cgroup_or_said_why_not(tmp_path):
    box = _ran_once(tmp_path / "box")
    made, missing = set(box.cgroups), box.cgroups_missing
    assert made | set(missing) == {"pids", "cpu", "memory"} and not made & set(missing), (made, missing)
    assert all(reason.strip() for reason in missing.values()), missing


def _cgroup_v2_container() -> bool:
    """cgroup v2 only, this process's cgroup the container's own (pid 1 in it), pids available."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    init = Path("/proc/1/cgroup").read_text().splitlines()
    if lines != [line for line in lines if line.startswith("0::")] or not lines:
        return False
    ours, theirs = lines[0].split(":", 2)[2].strip("/"), init[0].split(":", 2)[2].strip("/") if init else None
    folder = Path("/sys/fs/cgroup") / ours
    if folder.name == "hercules-leaf":
        folder, ours = folder.parent, str(Path(ours).parent).strip(".")
    return theirs in (ours, f"{ours}/hercules-leaf".strip("/")) and \
        "pids" in (folder / "cgroup.controllers").read_text().split() and os.access(folder, os.W_OK)


@pytest.mark.skipif(not _cgroup_v2_container(), reason="needs a cgroup v2 container whose cgroup this process may write")
def test_in_a_cgroup_v2_container_each_sandbox_gets_its_cgroups(tmp_path):
    # The H200 machine's layout: the container's cgroup holds its processes, so its controllers
    # can be enabled below it only once they sit in a leaf.
    box = _ran_once(tmp_path / "box")
    assert "pids" in box.cgroups and "memory" in box.cgroups, box.cgroups_missing


def _cgroup_v2_beside() -> bool:
    """cgroup v2 only, this process's cgroup not the container's own (pid 1 elsewhere), and the
    parent enables pids for its children and may be written: the H200 machine's command cgroups."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    if os.geteuid() != 0 or not lines or lines != [line for line in lines if line.startswith("0::")]:
        return False
    ours = lines[0].split(":", 2)[2].strip("/")
    if not ours or _cgroup_v2_container():
        return False
    parent = (Path("/sys/fs/cgroup") / ours).parent
    return "pids" in (parent / "cgroup.subtree_control").read_text().split() and os.access(parent, os.W_OK)


@pytest.mark.skipif(not _cgroup_v2_beside(), reason="needs a cgroup v2 command cgroup beside which root may write")
def test_in_a_cgroup_v2_command_cgroup_each_sandbox_gets_cgroups_beside_it(tmp_path):
    box = _ran_once(tmp_path / "box")
    assert "pids" in box.cgroups and "memory" in box.cgroups, box.cgroups_missing
    ours = Path("/proc/self/cgroup").read_text().split(":", 2)[2].strip().strip("/")
    assert all(Path(path).parent.name == f"hercules-beside-{Path(ours).name}" for path in box._cgroups.paths.values())


UNMAPPED_MEMFD = """
    import os, sys
    fd = os.memfd_create("hoard")
    chunk = b"x" * (1 << 20)
    for _ in range(int(sys.argv[1])):
        os.write(fd, chunk)  # page-cache pages of the memfd, mapped by no process: outside every RSS
    print("wrote", sys.argv[1], flush=True)
    import time; time.sleep(30)
"""


@needs_bwrap
def test_memory_no_process_maps_counts_against_the_bound_where_a_memory_cgroup_exists(tmp_path):
    limits = dataclasses.replace(SandboxLimits.default(), memory_bytes=300 * 10**6)
    box = Sandbox(tmp_path / "bomb", limits=limits)
    p = box.popen([sys.executable, "-c", textwrap.dedent(UNMAPPED_MEMFD), "600"], env=dict(os.environ),
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        if "memory" not in _cgroups_of(box):
            pytest.skip("no memory cgroup on this host: the documented gap")
        p.communicate(timeout=60)
    finally:
        box.kill()
    assert box.breach and "host memory" in box.breach, box.breach
    assert p.returncode == -signal.SIGKILL


def test_the_file_size_limit_admits_any_file_the_memory_bound_admits():
    """The harness's largest file is a memory file of a burst's outputs: a file-size limit below the
    memory bound fails honest problems with large outputs in the harness's own packing."""
    limits = SandboxLimits.default()
    assert limits.file_size_bytes >= limits.memory_bytes


def test_an_error_from_a_limit_names_the_limit_and_its_value():
    import errno
    import resource

    from hercules.harness.worker import _limit_hit

    said = _limit_hit(OSError(errno.EFBIG, "File too large"))
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    assert "RLIMIT_FSIZE" in said
    assert ("unlimited" in said) if soft == resource.RLIM_INFINITY else (f"{soft / 2**30:.1f} GiB" in said)
    assert _limit_hit(ValueError("unrelated")) == ""


SPINNERS = """
import os, sys, time
if os.fork() == 0:
    os.setsid()  # a detached child: still inside, still stopped with the rest
    while True:
        pass
while True:
    pass
"""


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


@needs_bwrap
def test_a_paused_sandbox_takes_no_host_time_and_resumes(tmp_path):
    """While paused every process inside, detached ones too, is stopped: its CPU time does not move
    (a trusted baseline timed meanwhile cannot be slowed by it); after resume they run again."""
    box = Sandbox(tmp_path / "box")
    box.popen([sys.executable, "-c", SPINNERS], env=dict(os.environ))
    try:
        assert wait_until(lambda: len(box.processes()) >= 3)  # the namespace's init and both spinners
        with box.paused() as stopped:
            assert stopped
            before = {pid: _cpu_ticks(pid) for pid in box.processes()}
            time.sleep(0.5)
            after = {pid: _cpu_ticks(pid) for pid in before}
            assert len(before) >= 3 and before == after, (before, after)
        # nothing inside is stopped any more, and the two spinners run again (the namespace's init
        # only waits); how soon they get a core depends on the host's load
        assert not [pid for pid in box.processes() if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"]
        assert wait_until(lambda: sum(_cpu_ticks(pid) > ticks for pid, ticks in after.items()) >= 2, timeout=30)
    finally:
        box.kill()
    assert box.processes() == []

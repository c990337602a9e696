"""A fork server for the trusted reference worker: torch imported once per evaluating process.

Every evaluation starts a reference worker, and a fresh Python process spends ~1.1 s of a core
importing torch before it can answer (1.07 s of a red-team evaluation's 5.7 s on the 2-core
machine). The zygote imports torch and the worker module once, single-threaded and without
touching a device, then forks one worker per request: the child starts with everything imported.
The candidate's worker never comes from here: it starts inside a fresh sandbox.

What a fresh process would read at start-up (its import path, the allocator's and OpenMP's
settings, library paths) must be what the zygote started with, so a zygote serves only requests
whose environment equals its own outside ``LATE_READ`` (variables read after start-up: Hercules'
own, pytest's, Triton's); a request with another environment gets a zygote of its own, and the
old one ends once its children have. The child takes the request's whole environment, working
directory and descriptors before it runs the worker, in a session of its own (as
``start_new_session`` gives a plain child).

The parent holds a ``ForkedProcess`` that answers like ``subprocess.Popen`` (``pid``, ``poll``,
``wait``, ``returncode`` with -N for signal N): the zygote reaps its children and writes each
one's exit status into a pipe of its own. Workers never outlive their evaluation: a child dies
with the zygote (its own parent-death signal), and the zygote, on losing its socket to the
evaluating process, kills its children at once if that process is gone, or waits for them if the
socket was only retired.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping

# Read after a process has started, so a forked child that takes the request's value behaves as a
# fresh process would: Hercules' own settings, pytest's per-test variables, Triton's knobs (read
# when a kernel is decorated or launched, never by torch's import).
LATE_READ_PREFIXES = ("HERCULES_", "PYTEST_", "TRITON_")
LATE_READ = frozenset({"PWD", "OLDPWD"})
REPLY_TIMEOUT_S = 120.0  # the zygote's own start-up (torch's import) on a loaded host included
_MESSAGE_BYTES = 1 << 20


def start_key(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The part of an environment a process reads at start-up."""
    return tuple(sorted((k, v) for k, v in env.items()
                        if k not in LATE_READ and not k.startswith(LATE_READ_PREFIXES)))


class ForkedProcess:
    """A zygote's child as ``subprocess.Popen`` shows a child: pid, poll, wait, returncode."""

    def __init__(self, pid: int, status_fd: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._status_fd = status_fd
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        return self._collect(0.0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._collect(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"reference worker {self.pid}", timeout)
        return code

    def _collect(self, timeout: float | None) -> int | None:
        with self._lock:
            if self.returncode is not None:
                return self.returncode
            poller = select.poll()
            poller.register(self._status_fd, select.POLLIN | select.POLLHUP)
            if not poller.poll(None if timeout is None else max(0, int(timeout * 1000))):
                return None
            data = os.read(self._status_fd, 64)
            os.close(self._status_fd)
            # No word from the zygote: it ended, and its children with it (their parent-death signal).
            self.returncode = int(data) if data.strip() else -signal.SIGKILL
            return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class Zygote:
    """The parent's end of one zygote process."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.key = start_key(env)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "hercules.harness.zygote", str(theirs.fileno())],
                pass_fds=[theirs.fileno()], env=dict(env), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        finally:
            theirs.close()
        self.sock = ours
        self.lock = threading.Lock()
        self.broken = False

    def spawn(self, role: str, conn_fd: int, log_fd: int, env: Mapping[str, str], cwd: str) -> ForkedProcess:
        """A worker forked from the zygote; raises OSError when the zygote cannot serve."""
        status_r, status_w = os.pipe()
        try:
            with self.lock:
                if self.broken:
                    raise OSError("the zygote has ended")
                try:
                    message = json.dumps({"role": role, "env": dict(env), "cwd": cwd}).encode()
                    socket.send_fds(self.sock, [message], [conn_fd, log_fd, status_w])
                    self.sock.settimeout(REPLY_TIMEOUT_S)
                    reply = self.sock.recv(4096)
                except OSError:
                    self.broken = True
                    raise
                if not reply:
                    self.broken = True
                    raise OSError("the zygote ended before it forked")
                pid = int(json.loads(reply)["pid"])
        except BaseException:
            os.close(status_r)
            raise
        finally:
            os.close(status_w)
        return ForkedProcess(pid, status_r)

    def retire(self) -> None:
        """No more requests: the zygote ends once its children have. (A socket that closes without
        this word means the evaluating process is gone, and the zygote kills its children.)"""
        self.broken = True
        try:
            self.sock.send(json.dumps({"retire": True}).encode())
        except OSError:
            pass
        self.sock.close()
        threading.Thread(target=self.process.wait, daemon=True).start()  # reap it when it ends


_current: Zygote | None = None
_current_lock = threading.Lock()


def spawn(role: str, conn_fd: int, log_fd: int, env: Mapping[str, str], cwd: str) -> ForkedProcess | None:
    """A worker forked from this process's zygote for ``env`` (started on first use), or None
    where no zygote can serve (the caller starts a plain process)."""
    global _current
    if os.environ.get("HERCULES_ZYGOTE", "1") == "0" or not hasattr(socket, "send_fds"):
        return None
    with _current_lock:
        if _current is not None and (_current.broken or _current.key != start_key(env)):
            _current.retire()
            _current = None
        if _current is None:
            try:
                _current = Zygote(env)
            except OSError:
                return None
        zygote = _current
    try:
        return zygote.spawn(role, conn_fd, log_fd, env, cwd)
    except (OSError, ValueError, KeyError):
        return None


# ---------------------------------------------------------------------------------------------
# The zygote process


def _child(request: dict, fds: list[int]) -> None:
    """In the forked child: become the worker the request describes (never returns)."""
    code = 1
    try:
        conn_fd, log_fd, _status_w = fds
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        # Only the channel to the parent stays open: not the zygote's socket, its wake-up pipe or
        # the other children's status pipes.
        os.closerange(3, conn_fd)
        os.closerange(conn_fd + 1, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 65536)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[0] = os.getcwd()  # as ``python -m`` puts the working folder first
        sys.argv = [sys.argv[0], request["role"], str(conn_fd)]
        from hercules.harness import worker
        worker.main()  # ends the process itself
        code = 0
    except BaseException:  # noqa: BLE001 - a child must never return into the zygote's loop
        import traceback
        traceback.print_exc()
    finally:
        os._exit(code)


def _preload() -> None:
    """What later children would each import for the roofline's FLOP count (torch's flop_counter,
    0.27 s and 81 modules on the 2-core CPU machine). Done before the second child is forked: a
    single evaluation does not wait for it, and nothing is imported in the background beside a
    measurement; the third evaluation on in a bench or a batch finds it imported. Pure imports: no
    thread is started, nothing touches a device. (torch._dynamo, ~800 modules and 1.1-1.3 s, is no
    longer needed: hercules.harness.flops counts without Dynamo's disable wrapper.)"""
    import torch.utils.flop_counter  # noqa: F401

    from hercules.harness import flops, roofline  # noqa: F401


def serve(sock: socket.socket) -> None:
    """Fork a worker per request until the socket closes; report each child's exit status."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, int] = {}  # pid -> its status pipe's write end
    accepting = True
    forked = 0

    def reap() -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            fd = children.pop(pid, None)
            if fd is not None:
                try:
                    os.write(fd, str(os.waitstatus_to_exitcode(status)).encode())
                except OSError:
                    pass
                os.close(fd)

    while accepting or children:
        watched = [wake_r] + ([sock] if accepting else [])
        ready, _, _ = select.select(watched, [], [], 1.0)
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        reap()
        if sock not in ready:
            continue
        try:
            message, fds, _flags, _addr = socket.recv_fds(sock, _MESSAGE_BYTES, 3)
        except OSError:
            message, fds = b"", []
        request = json.loads(message) if message else {}
        if not message or request.get("retire"):
            accepting = False
            for fd in fds:
                os.close(fd)
            if not message:  # the socket closed unannounced: the evaluating process is gone
                for pid in children:
                    for kill in (os.killpg, os.kill):
                        try:
                            kill(pid, signal.SIGKILL)
                        except OSError:
                            pass
            continue
        if forked == 1:  # a second evaluation: this process runs several, so later ones gain
            try:
                _preload()
            except Exception:  # noqa: BLE001 - children import what they need themselves
                pass
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, fds)
        conn_fd, log_fd, status_w = fds
        os.close(conn_fd)
        os.close(log_fd)
        children[pid] = status_w
        try:
            sock.send(json.dumps({"pid": pid}).encode())
        except OSError:
            accepting = False
        forked += 1
    os._exit(0)


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    import torch  # noqa: F401 - what every child would otherwise import itself
    from hercules.harness import worker  # noqa: F401
    serve(sock)


if __name__ == "__main__":
    main()

"""Open a page in headless Chromium and report what a reader would see: console errors, the size of
every image, a screenshot. Driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
NUL-terminated JSON on file descriptors 3 and 4), so nothing beyond the browser is needed."""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell")


def find_chromium() -> str | None:
    """``$HERCULES_CHROMIUM``, else the first Chromium-family browser on PATH."""
    explicit = os.environ.get("HERCULES_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


@dataclass(frozen=True)
class PageView:
    title: str
    errors: tuple[str, ...]  # console.error calls, uncaught exceptions, browser log errors
    images: tuple[dict[str, Any], ...]  # every <img> and <svg>: tag, id, rendered and natural size
    screenshot: bytes  # PNG of the whole page
    seconds: float
    probe: Any = None  # what the ``probe`` expression returned, evaluated after the screenshot


# Every image, after it has been decoded (decode() rejects a broken one: it then has no natural size).
_IMAGES_JS = """
Promise.all(Array.from(document.images).map(function (i) { return i.decode().catch(function () {}); }))
  .then(function () {
    return JSON.stringify(Array.from(document.querySelectorAll('img, svg')).map(function (e) {
      var r = e.getBoundingClientRect(), figure = e.closest('figure');
      return {tag: e.tagName.toLowerCase(), id: figure ? figure.id : '', width: r.width, height: r.height,
              natural_width: e.naturalWidth || 0, natural_height: e.naturalHeight || 0};
    }));
  })
"""


class _Pipe:
    """The DevTools protocol over Chromium's debugging pipe, one request at a time."""

    def __init__(self, write_fd: int, read_fd: int, deadline: float):
        self.write_fd, self.read_fd, self.deadline = write_fd, read_fd, deadline
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _receive(self) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise EOFError("Chromium closed its debugging pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self.next_id += 1
        request: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            request["sessionId"] = session
        os.write(self.write_fd, json.dumps(request).encode() + b"\0")
        while True:
            message = self._receive()
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method: str) -> None:
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._receive())


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        params = e.get("params", {})
        if e.get("method") == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            out.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif e.get("method") == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            out.append("exception: " + str(details.get("exception", {}).get("description") or details.get("text")))
        elif e.get("method") == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            out.append("log: " + str(params["entry"].get("text")))
    return out


def view_page(browser: str, page: Path, probe: str | None = None, width: int = 1400, height: int = 900,
              timeout_s: float = 30.0) -> PageView:
    """Load ``page`` (a local file) in a fresh headless browser and look at it; then evaluate
    ``probe`` (a JavaScript expression, e.g. clicks on the page) and keep its value."""
    started = time.monotonic()
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()

    def child_fds() -> None:  # the browser reads commands on fd 3 and answers on fd 4
        a, b = os.dup(to_browser_r), os.dup(from_browser_w)  # dup first: a pipe may already be 3 or 4
        os.dup2(a, 3)
        os.dup2(b, 4)

    with tempfile.TemporaryDirectory(prefix="hercules-chromium-") as profile:
        args = [browser, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--mute-audio", f"--user-data-dir={profile}", "about:blank"]
        # --no-sandbox: Chromium refuses to start as root (CI) with its sandbox on. close_fds=False, or
        # the fds 3 and 4 made in child_fds would be closed before the browser starts.
        process = subprocess.Popen(args, preexec_fn=child_fds, close_fds=False, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        try:
            cdp = _Pipe(to_browser_w, from_browser_r, started + timeout_s)
            target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                cdp.call(f"{domain}.enable", None, session)
            cdp.call("Emulation.setDeviceMetricsOverride",
                     {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
            cdp.call("Page.navigate", {"url": page.resolve().as_uri()}, session)
            cdp.wait_for("Page.loadEventFired")
            images = cdp.call("Runtime.evaluate", {"expression": _IMAGES_JS, "awaitPromise": True,
                                                   "returnByValue": True}, session)["result"]["value"]
            title = cdp.call("Runtime.evaluate", {"expression": "document.title", "returnByValue": True},
                             session)["result"]["value"]
            shot = cdp.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
            probed = None
            errors = []
            if probe:
                answer = cdp.call("Runtime.evaluate", {"expression": probe, "returnByValue": True}, session)
                if "exceptionDetails" in answer:  # thrown by the page's own handlers or by the probe
                    errors.append("probe: " + str(answer["exceptionDetails"].get("exception", {}).get("description")))
                probed = answer["result"].get("value")
            errors = _errors(cdp.events) + errors
            try:
                cdp.call("Browser.close")
            except (EOFError, TimeoutError, RuntimeError):
                pass
        finally:
            os.close(to_browser_w)
            os.close(from_browser_r)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return PageView(title=title, errors=tuple(errors), images=tuple(json.loads(images)),
                    screenshot=base64.b64decode(shot["data"]), seconds=time.monotonic() - started, probe=probed)


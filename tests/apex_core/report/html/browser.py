"""Drive a real headless Chromium over the DevTools protocol on a pipe (no driver, no websocket library).

``--remote-debugging-pipe`` makes the browser read commands from file descriptor 3 and write
replies and events to descriptor 4, each message JSON ended by a NUL byte (what Puppeteer's
``pipe: true`` uses). That is all a test needs: open a file, collect every exception, console
error, log entry and network request, evaluate a script, take a screenshot, print a PDF.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

BROWSER_ENV = "APEX_BROWSER"  # a browser binary to use instead of the ones searched for
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_browser() -> str | None:
    named = os.environ.get(BROWSER_ENV)
    if named:
        return shutil.which(named) or (named if Path(named).is_file() else None)
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


class BrowserError(RuntimeError):
    pass


class Chromium:
    """One headless browser process with one page, driven over the DevTools pipe."""

    def __init__(self, binary: str, width: int = 1366, height: int = 900, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        self._buffer = b""
        self._profile = tempfile.mkdtemp(prefix="apex-browser-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The browser's ends go to its descriptors 3 and 4 through a shell's redirections, not a
        # preexec_fn: that would fork this (threaded: jax, xdist) process and run Python in the child.
        # Both are copied above 10 first, so that neither sits on 3 or 4 when the other is moved there.
        reading, writing = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser_r, from_browser_w))
        os.close(to_browser_r)
        os.close(from_browser_w)

        args = [
            binary,
            "--headless=new",
            "--remote-debugging-pipe",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-extensions",
            "--disable-background-networking",
            "--mute-audio",
            f"--user-data-dir={self._profile}",
            f"--window-size={width},{height}",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self.process = subprocess.Popen(
            ["bash", "-c", f'exec 3<&{reading} 4>&{writing} {reading}<&- {writing}>&- && exec "$0" "$@"',
             *args],
            pass_fds=(reading, writing),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(reading)
        os.close(writing)
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise BrowserError(f"no answer from the browser within {self.timeout_s} s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError(f"the browser closed the pipe (exit code {self.process.poll()})")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method: str, params: dict[str, Any] | None = None, session: bool = False) -> dict[str, Any]:
        """Send one command and wait for its reply; events meanwhile are kept in ``events``."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, event: str, since: int = 0) -> dict[str, Any]:
        """The first ``event`` among the events from index ``since`` on, waiting for it if need be."""
        deadline = time.monotonic() + self.timeout_s
        for seen in self.events[since:]:
            if seen.get("method") == event:
                return seen
        while True:
            message = self._read_message(deadline)
            if "method" in message:
                self.events.append(message)
                if message["method"] == event:
                    return message

    def open(self, path: Path) -> float:
        """Navigate to a local file and wait for its load event; returns the seconds it took."""
        started, seen = time.monotonic(), len(self.events)
        self.call("Page.navigate", {"url": path.resolve().as_uri()}, session=True)
        self.wait_for("Page.loadEventFired", since=seen)
        return time.monotonic() - started

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=True,
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        """The whole page, not only the window, as PNG."""
        size = self.call("Page.getLayoutMetrics", session=True)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        data = self.call(
            "Page.captureScreenshot",
            {"format": "png", "clip": clip, "captureBeyondViewport": True},
            session=True,
        )["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def pdf(self, path: Path) -> Path:
        data = self.call("Page.printToPDF", {"printBackground": False}, session=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def problems(self) -> list[str]:
        """Script exceptions, console errors and error log entries seen so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                found.append(
                    f"exception: {details.get('exception', {}).get('description') or details.get('text')}"
                )
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(f"console.{params['type']}: {[a.get('value') for a in params.get('args', [])]}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                found.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        return found

    def requests(self) -> list[str]:
        return [
            e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"
        ]

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.call("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

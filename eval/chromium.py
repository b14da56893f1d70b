"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``): no websocket, no
browser download, only the standard library and the system's ``chromium`` (Debian's package;
``scripts/install_chromium.sh`` installs it). The viewer's browser test and ``eval/bench_viewer.py`` use it to load
a report, read its DOM, time its load event and take screenshots.

Messages are JSON objects, each ended by a NUL byte: commands go to the browser's fd 3, replies and events come
from its fd 4 (the protocol Puppeteer's ``pipe: true`` speaks).
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any


__all__ = ["BINARIES", "Chromium", "ChromiumError", "find_chromium"]

#: Names the browser goes by, in the order they are looked for (``$ARES_CHROMIUM`` first).
BINARIES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


class ChromiumError(RuntimeError):
    """The browser did not start, went away, or answered a command with an error."""


def find_chromium() -> str | None:
    """The browser to run: ``$ARES_CHROMIUM`` when set, else the first of :data:`BINARIES` on the PATH."""
    named = os.environ.get("ARES_CHROMIUM")
    if named:
        return named if Path(named).is_file() else shutil.which(named)
    return next((found for name in BINARIES if (found := shutil.which(name))), None)


class Chromium:
    """One headless browser with one page (a tab).

    Args:
        binary: The browser (default: :func:`find_chromium`).
        width, height: The page's viewport in CSS pixels (device scale 1).
        timeout: Seconds any one command or wait may take.

    Raises:
        ChromiumError: No browser, or it did not start.
    """

    def __init__(self, binary: str | None = None, width: int = 1200, height: int = 900,
                 timeout: float = 60.0) -> None:
        binary = binary or find_chromium()
        if not binary:
            raise ChromiumError("no chromium found: run scripts/install_chromium.sh (Debian's chromium package), or "
                                "set ARES_CHROMIUM to the browser binary.")
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="ares-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        args = [binary, "--headless", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                "--disable-sync", "--mute-audio", "--hide-scrollbars", f"--user-data-dir={self.profile}",
                "about:blank"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # the sandbox refuses to run as root (containers, CI)

        def wire() -> None:  # in the child: our pipe ends become its fds 3 (commands) and 4 (replies)
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self._log = tempfile.TemporaryFile()  # a file, not a pipe: a chatty browser never blocks on a full pipe
        try:
            self.process = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=wire, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=self._log)
        except OSError as err:
            raise ChromiumError(f"cannot start {binary!r}: {err}") from err
        finally:
            os.close(to_browser_r)
            os.close(from_browser_w)
        self._buffer = b""
        self._events: list[dict[str, Any]] = []
        self._next_id = 0
        self.session: str | None = None
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False})

    # -- the protocol ------------------------------------------------------------------------------------------------
    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_browser], [], [], max(0.0, left))
            if not ready:
                raise ChromiumError(f"chromium did not answer within {self.timeout:g} s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                self._log.seek(0)
                err = self._log.read().decode(errors="replace")[-2000:]
                raise ChromiumError(f"chromium went away (exit status {self.process.poll()}): {err.strip()}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict[str, Any] | None = None, session: bool = True) -> dict[str, Any]:
        """Send one command (to the page's session unless ``session=False``) and return its result."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            self._events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        """The next event ``method`` of the page (events that came before are kept in :attr:`events`)."""
        deadline = time.monotonic() + self.timeout
        for k, event in enumerate(self._events):
            if event.get("method") == method:
                return self._events.pop(k)
        while True:
            event = self._read(deadline)
            if event.get("method") == method:
                return event
            self._events.append(event)

    @property
    def events(self) -> list[dict[str, Any]]:
        return self._events

    # -- what the tests and the benchmark do --------------------------------------------------------------------------
    def open(self, path: str | os.PathLike[str], dark: bool = False) -> dict[str, float]:
        """Load a local file (``prefers-color-scheme`` dark or light) and wait for its load event; return the
        navigation timing in milliseconds from navigation start: ``first_contentful_paint`` (``None`` when nothing
        was painted yet), ``dom_content_loaded`` and ``load_event``."""
        self.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme",
                                                                "value": "dark" if dark else "light"}]})
        self._events.clear()
        self.call("Page.navigate", {"url": Path(path).resolve().as_uri()})
        self.wait_event("Page.loadEventFired")
        timing = self.evaluate("(() => { const n = performance.getEntriesByType('navigation')[0];"
                               " const p = performance.getEntriesByName('first-contentful-paint')[0];"
                               " return {dom: n.domContentLoadedEventEnd, load: n.loadEventEnd,"
                               " paint: p ? p.startTime : null}; })()")
        return {"dom_content_loaded": float(timing["dom"]), "load_event": float(timing["load"]),
                "first_contentful_paint": None if timing["paint"] is None else float(timing["paint"])}

    def watch_long_tasks(self) -> None:
        """From the next :meth:`open` on, record every main-thread task longer than 50 ms (the Long Tasks API) in
        ``window.__ares_long_tasks``: how long the page could not answer input while it loaded."""
        self.call("Page.addScriptToEvaluateOnNewDocument", {"source": (
            "window.__ares_long_tasks = []; new PerformanceObserver(list => { for (const e of list.getEntries()) "
            "window.__ares_long_tasks.push(e.duration); }).observe({type: 'longtask', buffered: true});")})

    def requests(self) -> list[str]:
        """The URLs the page asked for since it was opened (the document itself included)."""
        return [e["params"]["request"]["url"] for e in self._events if e.get("method") == "Network.requestWillBeSent"]

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (returned by value)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise ChromiumError(f"{expression[:80]!r} threw: {result['exceptionDetails'].get('text')} "
                                f"{result['exceptionDetails'].get('exception', {}).get('description', '')}")
        return result["result"].get("value")

    def screenshot(self, full_page: bool = False) -> bytes:
        """A PNG of the viewport (or of the whole page)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        return base64.b64decode(self.call("Page.captureScreenshot", params)["data"])

    def close(self) -> None:
        """Close the browser (killed if it does not exit) and remove its profile."""
        try:
            if self.process.poll() is None:
                try:
                    self.call("Browser.close", session=False)
                except (ChromiumError, OSError):
                    pass
                try:
                    self.process.wait(10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(10)
        finally:
            for fd in (self._to_browser, self._from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._log.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

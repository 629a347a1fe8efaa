"""A headless Chromium driven over the Chrome DevTools Protocol (a websocket; no Playwright, no downloads).

Used by the browser tests and to make the README's screenshot: open a page, wait for an expression to hold,
evaluate JavaScript, press keys (the page's own controls, as a user would), record every URL the page requests,
take a PNG screenshot.
"""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

__all__ = ["Browser", "BrowserError", "free_port"]


def free_port(host="127.0.0.1"):
    """A TCP port nobody listens on right now (for a test's page)."""
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class BrowserError(RuntimeError):
    """Chromium did not start, or a DevTools command failed or timed out."""


class Browser:
    """``with Browser(chromium, width, height) as b: b.open(url); b.screenshot_png()``."""

    def __init__(self, executable, width_px=1280, height_px=800, timeout_s=60.0):
        from websockets.sync.client import connect

        self.width_px, self.height_px = int(width_px), int(height_px)
        self._profile = tempfile.mkdtemp(prefix="manip-view-chromium-")
        self._proc = subprocess.Popen(
            [executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader",
             "--use-angle=swiftshader", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
             "--disable-background-networking", "--disable-component-update", "--hide-scrollbars",
             "--force-device-scale-factor=1", f"--window-size={self.width_px},{self.height_px}",
             "--remote-debugging-port=0", f"--user-data-dir={self._profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port_file = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while not (port_file.is_file() and port_file.read_text().strip()):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                err = self._proc.stderr.read().decode(errors="replace")[-500:] if self._proc.poll() is not None else ""
                self.close()
                raise BrowserError(f"chromium did not open its DevTools port: {err}")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=10))
        page = next(t for t in targets if t.get("type") == "page")
        self._ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10)
        self._id = 0
        self.requests = []  # every URL the page asked for (Network.requestWillBeSent)
        self.console = []   # console errors and exceptions
        self.send("Page.enable")
        self.send("Network.enable")
        self.send("Runtime.enable")
        # A headless page has no focus, and viser's client only reconnects a dropped websocket (a loaded machine
        # can drop one) while its page has the focus.
        self.send("Emulation.setFocusEmulationEnabled", enabled=True)
        self.send("Emulation.setDeviceMetricsOverride", width=self.width_px, height=self.height_px,
                  deviceScaleFactor=1, mobile=False)

    # --------------------------------------------------------------------------------- protocol
    def _event(self, msg):
        method = msg.get("method")
        if method == "Network.requestWillBeSent":
            self.requests.append(msg["params"]["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            self.console.append(str(msg["params"]["exceptionDetails"].get("text")))

    def send(self, method, timeout_s=30.0, **params):
        """Run one DevTools command; its result dict (BrowserError on an error reply or a timeout)."""
        self._id += 1
        my = self._id
        self._ws.send(json.dumps({"id": my, "method": method, "params": params}))
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"{method}: no reply in {timeout_s} s")
            try:
                msg = json.loads(self._ws.recv(timeout=left))
            except TimeoutError:
                continue
            if msg.get("id") == my:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error'].get('message')}")
                return msg.get("result", {})
            self._event(msg)

    def evaluate(self, expression, timeout_s=30.0):
        """The JSON value of a JavaScript expression in the page (awaits promises)."""
        r = self.send("Runtime.evaluate", timeout_s=timeout_s, expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise BrowserError(f"{expression[:60]}...: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def wait_for(self, expression, timeout_s=30.0, what=None):
        """Poll until the expression is truthy; its value (BrowserError after timeout_s). An expression that throws
        (e.g. no document.body yet while the page loads) counts as false."""
        deadline = time.monotonic() + timeout_s
        err = None
        while True:
            try:
                v = self.evaluate(expression)
            except BrowserError as e:
                v, err = None, e
            if v:
                return v
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out after {timeout_s} s waiting for {what or expression}"
                                   + (f" (last error: {err})" if err else ""))
            time.sleep(0.2)

    # ---------------------------------------------------------------------------------- actions
    def open(self, url):
        self.send("Page.navigate", url=url)

    @property
    def pid(self):
        """Process id of Chromium's browser process (its renderer and GPU processes are its children)."""
        return self._proc.pid

    def add_init_script(self, source):
        """Run the JavaScript ``source`` in every page opened from now on, before the page's own scripts."""
        self.send("Page.addScriptToEvaluateOnNewDocument", source=source)

    def press(self, key, code=None, key_code=None, times=1):
        """Key down/up of ``key`` (e.g. "ArrowRight") on the focused element, ``times`` times."""
        codes = {"ArrowRight": 39, "ArrowLeft": 37, "ArrowUp": 38, "ArrowDown": 40, "Home": 36, "End": 35,
                 "PageUp": 33, "PageDown": 34}
        kc = key_code or codes.get(key, 0)
        for _ in range(times):
            for kind in ("rawKeyDown", "keyUp"):
                self.send("Input.dispatchKeyEvent", type=kind, key=key, code=code or key,
                          windowsVirtualKeyCode=kc, nativeVirtualKeyCode=kc)

    def click(self, x_px, y_px):
        """A left mouse click at viewport pixel (x, y) (press, release)."""
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=float(x_px), y=float(y_px), button="left",
                      clickCount=1)

    def screenshot_png(self):
        """PNG bytes of the viewport."""
        return base64.b64decode(self.send("Page.captureScreenshot", timeout_s=120.0, format="png")["data"])

    def close(self):
        try:
            if getattr(self, "_ws", None) is not None:
                self._ws.close()
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

"""A real headless Chromium (Debian's `chromium` and `chromium-driver`) driven by selenium,
for the page of `koog serve`: a phone's width and dark mode emulated as DevTools does, and
every request the page made kept, to tell what it loaded from where."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

T = TypeVar("T")
PHONE = (390, 844)


def _found(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is None:
        said = f"{name} is not installed (Debian package `{package}`)"
        if os.environ.get("CI"):
            pytest.fail(said)
        pytest.skip(said)
    return path


@contextmanager
def chromium(width: int = 1280, dark: bool = False) -> Iterator[Any]:
    """A browser at `width` CSS pixels (below 500, a phone's screen), light or dark."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = _found("chromium", "chromium")
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        f"--window-size={max(width, 800)},900",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(
        service=Service(_found("chromedriver", "chromium-driver")), options=options
    )
    try:
        if width < 800:
            driver.execute_cdp_cmd(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": PHONE[1], "deviceScaleFactor": 2, "mobile": True},
            )
        scheme = "dark" if dark else "light"
        driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
        )
        driver.set_page_load_timeout(20)
        yield driver
    finally:
        driver.quit()


def requested(driver: Any) -> list[str]:
    """Every URL the browser asked for since the last call."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def sideways_scroll(driver: Any) -> int:
    """How many pixels the page is wider than the screen (0: no sideways scroll)."""
    wide = driver.execute_script(
        "return Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
    )
    return int(wide) - int(driver.execute_script("return window.innerWidth"))


def wait_for(check: Callable[[], T | None], timeout: float = 10.0, every: float = 0.1) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s")
        time.sleep(every)


def screenshot(driver: Any, path: str, width: int) -> None:
    """The whole page, as tall as it is."""
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    if width < 800:
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": min(height, 4000), "deviceScaleFactor": 2, "mobile": True},
        )
    else:
        driver.set_window_size(width, min(max(height + 120, 600), 4000))
    time.sleep(0.2)
    driver.save_screenshot(path)

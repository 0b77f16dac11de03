"""Packages from npm, installed once per machine and set of pins (under a lock: both test
workers may want them at once). An install that fails (npm out of reach) skips the tests
that need it outside CI; under CI it is a failure."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

HOME = pwd.getpwuid(os.getuid()).pw_dir
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME") or Path(HOME) / ".cache")


def installed(pins: Sequence[str], cache: str) -> Path:
    """The `node_modules/.bin` folder holding the pinned packages' commands, under
    `~/.cache/<cache>/<digest of the pins>` (older installs there are removed)."""
    root = CACHE_ROOT / cache
    key = hashlib.sha256(json.dumps(list(pins)).encode()).hexdigest()[:16]
    folder = root / key
    marker = folder / "complete"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return folder / "node_modules" / ".bin"
        for old in root.iterdir():
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
        folder.mkdir()
        started = time.monotonic()
        npm = shutil.which("npm")
        done = (
            subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *pins],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=900,
                env={**os.environ, "HOME": HOME},
            )
            if npm
            else None
        )
        if done is None or done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            why = f"npm install {' '.join(pins)} failed: " + (
                done.stderr[-3000:] if done else "npm is not installed"
            )
            if os.environ.get("CI"):
                pytest.fail(why)
            pytest.skip(why)
        marker.write_text(
            json.dumps({"pins": list(pins), "seconds": round(time.monotonic() - started)})
        )
        return folder / "node_modules" / ".bin"

"""Resolve `module:attribute` strings from config into Python callables.

Used by custom preprocessors and tools. Extra search folders (the config file's folder,
then the working directory) are tried so a user's helper module beside their config
imports without packaging.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from koogcli.core.errors import ConfigError


def resolve(
    spec: str, search_paths: Sequence[Path] = (), *, key: str = "callable"
) -> Callable[..., object]:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(
            f"{key} = {spec!r} is not of the form 'module:function'",
            hint="name a module importable from the config folder or the working directory",
        )
    for folder in search_paths:
        text = str(folder)
        if text not in sys.path:
            sys.path.append(text)
    try:
        target: object = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure of user code is a config problem
        raise ConfigError(
            f"{key} = {spec!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}",
            hint="check the module name and that it imports cleanly",
        ) from exc
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ConfigError(f"{key} = {spec!r}: module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ConfigError(f"{key} = {spec!r} is not callable")
    return target

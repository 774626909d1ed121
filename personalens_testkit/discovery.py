"""A package of kinds, one module each, that the package finds by itself: every module of the package that
declares its kind in one module-level name (``KIND = AssistantKind(...)``, ``BACKEND = ModelBackend(...)``).
Nothing else lists the kinds: adding one is adding its module."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable, Iterable, TypeVar

K = TypeVar("K")


def discover(package: str, path: Iterable[str], name: str, of: type[K], order: Callable[[K], Any]) -> dict[str, K]:
    """Each module's ``name`` that is an ``of``, by its ``.name``, sorted by ``order``."""
    found = []
    for module in pkgutil.iter_modules(path):
        declared = getattr(importlib.import_module(f"{package}.{module.name}"), name, None)
        if isinstance(declared, of):
            found.append(declared)
    return {declared.name: declared for declared in sorted(found, key=order)}  # type: ignore[attr-defined]

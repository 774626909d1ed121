"""A package of kinds, one module each, that the package finds by itself: every module of the package that
declares its kind in one module-level name (``KIND = AssistantKind(...)``, ``BACKEND = ModelBackend(...)``), and
every kind another installed package declares under the entry-point group that names them. Nothing else lists the
kinds: adding one is adding its module, here or in a package of one's own.

Another package declares its kinds in its metadata (pyproject.toml)::

    [project.entry-points."personalens_testkit.assistant_kinds"]
    echo = "my_plugin.echo_kind"            # a module with KIND = AssistantKind(...), or the object itself

    [project.entry-points."personalens_testkit.model_backends"]
    echo = "my_plugin.echo_backend"         # a module with BACKEND = ModelBackend(...)
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import types
from importlib.metadata import EntryPoint, EntryPoints, entry_points
from typing import Any, Callable, Iterable, TypeVar

from .errors import UsageError

K = TypeVar("K")


def discover(package: str, path: Iterable[str], name: str, of: type[K], order: Callable[[K], Any], *,
             group: str | None = None) -> dict[str, K]:
    """Each module's ``name`` that is an ``of``, by its ``.name``, then each one the entry points of ``group``
    declare, sorted by ``order``. An entry point that cannot be loaded, declares no ``of`` or takes a name already
    taken is left out, and what is wrong with it is kept for :func:`broken` (the run's settings refuse to start with
    it, one line naming the entry point and its distribution - never an import's traceback)."""
    found: dict[str, K] = {}
    for module in pkgutil.iter_modules(path):
        declared = getattr(importlib.import_module(f"{package}.{module.name}"), name, None)
        if isinstance(declared, of):
            found[declared.name] = declared  # type: ignore[attr-defined]
    for point in (installed().select(group=group) if group else ()):
        try:
            declared = _declared(point, name, of, group or "")
            taken = declared.name  # type: ignore[attr-defined]
            if taken in found:
                raise UsageError(f"{_where(point, group or '')}: declares {taken!r}, a name already taken "
                                 f"(known: {', '.join(found)})")
        except UsageError as exc:
            if str(exc) not in _BROKEN:
                _BROKEN.append(str(exc))
            continue
        found[taken] = declared
    return {key: found[key] for key in sorted(found, key=lambda key: order(found[key]))}


#: what is wrong with each entry point left out, in the order found
_BROKEN: list[str] = []


def broken() -> list[str]:
    """What is wrong with each declared kind or backend that was left out (empty: none)."""
    return list(_BROKEN)


@functools.cache
def installed() -> EntryPoints:
    """The entry points of every installed distribution, read once per process (each read scans them all)."""
    return entry_points()


def _where(point: EntryPoint, group: str) -> str:
    dist = point.dist.name if point.dist is not None else "an installed package"
    return f"entry point {point.name} = {point.value!r} of {dist} (group {group})"


def _declared(point: EntryPoint, name: str, of: type[K], group: str) -> K:
    try:
        loaded = point.load()
    except Exception as exc:  # its code is another package's: whatever it raises is named, not a traceback
        raise UsageError(f"{_where(point, group)}: cannot be loaded ({type(exc).__name__}: {exc})") from None
    declared = getattr(loaded, name, None) if isinstance(loaded, types.ModuleType) else loaded
    if not isinstance(declared, of):
        raise UsageError(f"{_where(point, group)}: is not a {of.__name__} (a module declaring one as {name} = "
                         f"{of.__name__}(...), or the object itself)")
    return declared

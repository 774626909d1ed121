"""What vcrpy imports for its patches: only the HTTP libraries the testkit's own calls go through.

Importing ``vcr`` imports every HTTP library vcrpy knows how to patch that is installed: aiohttp (which a
dependency installs; about 0.12 CPU-s), requests, urllib3, botocore - in every process that opens a
cassette, each xdist worker included. The testkit's calls go through httpx, and through botocore for
Bedrock; a bot's own traffic is never recorded. So while vcrpy's patch module loads, and while the router
builds its patches (:func:`~personalens_testkit.replay.router.install`), vcrpy's own imports of those libraries
fail as if they were not installed - in that thread only, and only for a library none of which is imported
yet (one partly there, and a library's own imports, go on as usual). The router patches none of them but
botocore (:attr:`~personalens_testkit.replay.router.Router.skip_patchers`), nor the standard library's
http.client, so a library imported later is built on the real classes; botocore is patched when it is
imported (:data:`LATER`, :func:`when_imported`), as vcrpy would have patched it. Installed with the ``replay``
package, before anything of vcrpy is imported.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import inspect
import sys
import threading
from typing import Any, Callable, Iterator

#: top-level packages vcrpy would import for a patch that the router never makes, or makes later
NOT_FOR_VCR = frozenset({"aiohttp", "requests", "urllib3", "httplib2", "tornado", "botocore"})
#: patched when first imported (by a Bedrock model): the module, and the router's patch builder for it
LATER = ("botocore.awsrequest", "_boto3")

_state = threading.local()
#: module name -> what to call with the module once it has loaded (:func:`when_imported`), by the callback's
#: qualified name: a module imported afresh (pytester's in-process runs) replaces its stale callback
_after: dict[str, dict[str, Callable[[Any], None]]] = {}


@contextlib.contextmanager
def without_unused_libraries() -> Iterator[None]:
    """In this thread, vcrpy's own import of a :data:`NOT_FOR_VCR` library none of which is imported yet fails as
    not installed. A library some of which is there already (botocore's exceptions, say) is imported on as usual,
    and so are a library's own imports."""
    before = getattr(_state, "blocking", False)
    _state.blocking = True
    try:
        yield
    finally:
        _state.blocking = before


class _VcrImports(importlib.abc.MetaPathFinder):
    """Blocks the unused libraries while vcrpy's patch module loads (and within :func:`without_unused_libraries`);
    runs what :func:`when_imported` asked for once its module has loaded."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        top = fullname.partition(".")[0]
        if getattr(_state, "blocking", False) and top in NOT_FOR_VCR and top not in sys.modules and _by_vcrpy():
            raise ModuleNotFoundError(f"{fullname} is not imported for vcrpy's patches", name=fullname)
        if (fullname != "vcr.patch" and fullname not in _after) or getattr(_state, "finding", False):
            return None
        spec = _found_by_the_others(fullname, path, target)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Wrapped(spec.loader, blocking=fullname == "vcr.patch")
        return spec


def _found_by_the_others(fullname: str, path: Any, target: Any) -> importlib.machinery.ModuleSpec | None:
    """The module's spec as the other finders in ``sys.meta_path`` find it (this finder, and any copy of it from
    a module imported afresh, answers None meanwhile in this thread)."""
    before = getattr(_state, "finding", False)
    _state.finding = True
    try:
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                return spec
        return None
    finally:
        _state.finding = before


def _by_vcrpy() -> bool:
    """Whether the import under way is vcrpy's own (the nearest frame outside the import machinery is vcrpy's
    code): a library vcrpy may import - botocore, when some of it is there already - imports what it needs."""
    frame = inspect.currentframe()
    while frame is not None and (frame.f_code.co_filename.startswith("<frozen importlib")
                                 or frame.f_globals.get("__name__") == __name__):
        frame = frame.f_back
    return frame is not None and str(frame.f_globals.get("__name__", "")).split(".")[0] == "vcr"


class _Wrapped(importlib.abc.Loader):
    """A module's own loader: vcrpy's patch module's run with vcrpy's imports of the unused libraries refused
    (``blocking``), any other's followed by what :func:`when_imported` asked for, once the module has loaded."""

    def __init__(self, loader: Any, *, blocking: bool) -> None:
        self.loader = loader
        self.blocking = blocking

    def __getattr__(self, name: str) -> Any:  # the wrapped loader's other parts (source, resources)
        if name == "loader":  # not set yet (a copy being made): not the wrapped loader's
            raise AttributeError(name)
        return getattr(self.loader, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        if self.blocking:
            with without_unused_libraries():
                self.loader.exec_module(module)
            return
        self.loader.exec_module(module)
        for callback in list(_after.get(module.__name__, {}).values()):
            callback(module)


def when_imported(name: str, callback: Callable[[Any], None]) -> None:
    """``callback(module)`` now if module ``name`` is imported, and each time it is imported from now on: once in a
    process as a rule; again should sys.modules lose it and the module load afresh (pytester's in-process runs put
    sys.modules and ``sys.meta_path`` back as they found them - a library first imported during such a run is
    then imported anew, and a finder added meanwhile is gone: the finder is put back here if it is)."""
    install_finder()
    _after.setdefault(name, {})[f"{callback.__module__}.{callback.__qualname__}"] = callback
    module = sys.modules.get(name)
    if module is not None:
        callback(module)


def install_finder() -> None:
    """Put the finder first in ``sys.meta_path`` (once a process)."""
    if not any(isinstance(finder, _VcrImports) for finder in sys.meta_path):
        sys.meta_path.insert(0, _VcrImports())

"""What vcrpy imports for its patches: only the HTTP libraries the testkit's own calls go through.

Importing ``vcr`` imports every HTTP library vcrpy knows how to patch that is installed: aiohttp (which a
dependency installs; about 0.12 CPU-s), requests, urllib3, botocore - in every process that opens a
cassette, each xdist worker included. The testkit's calls go through httpx, and through botocore for
Bedrock; a bot's own traffic is never recorded. So while vcrpy's patch module loads, and while the router
builds its patches (:func:`~personalens_testkit.replay.router.install`), those libraries are not imported in
that thread: vcrpy then patches what is there, as it does for a library that is not installed. The router
patches none of them but botocore (:attr:`~personalens_testkit.replay.router.Router.skip_patchers`), nor the
standard library's http.client, so a library imported later is built on the real classes. botocore is
patched when it is first imported (:data:`LATER`), as vcrpy would have patched it. Other threads import as
usual. Installed with the ``replay`` package, before anything of vcrpy is imported.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import threading
from typing import Any, Iterator

#: top-level packages vcrpy would import for a patch that the router never makes, or makes later
NOT_FOR_VCR = frozenset({"aiohttp", "requests", "urllib3", "httplib2", "tornado", "botocore"})
#: patched when first imported (by a Bedrock model): the module, and the router's patch builder for it
LATER = ("botocore.awsrequest", "_boto3")

_state = threading.local()


@contextlib.contextmanager
def without_unused_libraries() -> Iterator[None]:
    """In this thread, an import of a :data:`NOT_FOR_VCR` library that is not imported yet fails as not installed."""
    before = getattr(_state, "blocking", False)
    _state.blocking = True
    try:
        yield
    finally:
        _state.blocking = before


class _VcrImports(importlib.abc.MetaPathFinder):
    """Blocks the unused libraries while vcrpy's patch module loads (and within :func:`without_unused_libraries`)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if getattr(_state, "blocking", False) and fullname.partition(".")[0] in NOT_FOR_VCR:
            raise ModuleNotFoundError(f"{fullname} is not imported for vcrpy's patches", name=fullname)
        if fullname != "vcr.patch":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Blocking(spec.loader)
        return spec


class _Blocking(importlib.abc.Loader):
    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        with without_unused_libraries():
            self.loader.exec_module(module)


def install_finder() -> None:
    """Put the finder first in ``sys.meta_path`` (once a process)."""
    if not any(isinstance(finder, _VcrImports) for finder in sys.meta_path):
        sys.meta_path.insert(0, _VcrImports())

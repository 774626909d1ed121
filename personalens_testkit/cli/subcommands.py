"""What a command module adds its subcommands to: the public face of argparse's ``add_subparsers()`` result."""

from __future__ import annotations

import argparse
from typing import Any, Protocol


class Subcommands(Protocol):
    """``parser.add_subparsers()``'s value, as a command module uses it."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...

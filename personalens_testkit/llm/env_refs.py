"""``${VAR}`` in a configured value (a header, a bot's environment): read from the environment when it is used,
so the value itself - a key, a token - is never written in a config file."""

from __future__ import annotations

import os
import re
from typing import Mapping

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: str, env: Mapping[str, str] | None = None) -> str:
    """``"Bearer ${TOKEN}"`` -> the value with TOKEN read from the environment (missing: empty)."""
    source = os.environ if env is None else env
    return _VAR.sub(lambda m: source.get(m.group(1), ""), value)

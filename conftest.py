"""Repository-level pytest configuration.

The testkit's plugin is registered through its ``pytest11`` entry point (pip install -e .),
so nothing needs to be loaded here. deepeval is used as a library only: keep its
telemetry and .env loading off for every run started from this checkout.
"""

import os

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "1")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")

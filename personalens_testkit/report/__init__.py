"""The run report (typed: :class:`~.model.RunReport`) and what renders it: the terminal summary, JUnit XML,
the self-contained HTML page; and the agreement of two judges. No LLMs, no pytest.

``RunReport`` and ``build_report`` are loaded when first asked for: every process reads the table of report
formats (:data:`.outputs.FORMATS`, through the run's settings), and only the one that ends a run builds a report."""

from typing import Any

__all__ = ["RunReport", "build_report"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

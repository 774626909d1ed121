"""The run report (typed: :class:`~.model.RunReport`) and what renders it: the terminal summary, JUnit XML,
the self-contained HTML page; and the agreement of two judges. No LLMs, no pytest."""

from .model import RunReport, build_report

__all__ = ["RunReport", "build_report"]

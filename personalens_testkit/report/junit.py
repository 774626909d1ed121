"""JUnit XML from a run report: one test case per scenario, its scores as properties, and one test case per
run-level check (each aggregate gate, the infrastructure errors, the baseline's coverage and comparison), so
a CI check view that reads JUnit is red exactly when the run is.

A case's element follows its verdict: a regression is a ``<failure>`` (an ``<error>`` when the bot failed
on it), a known failure and a case the benchmark's models could not score are ``<skipped>`` with the
reason, an unexpected pass passes with a ``verdict`` property saying so.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any, Iterator

from ..scales import METRICS
from .model import RunReport

SUITES = {"sd": "test_single_domain", "md": "test_multi_domain"}
RUN_SUITE = "personalens_run"


def _case(report: RunReport, row: Any, suite_name: str, verdict: str) -> ET.Element:
    case = ET.Element("testcase", classname=f"suites.{suite_name}", name=row.case_id, time=f"{row.seconds:.3f}")
    props = ET.SubElement(case, "properties")
    ET.SubElement(props, "property", name="verdict", value=verdict)
    if row.expected is not None:
        ET.SubElement(props, "property", name="expected", value=row.expected)
    for metric in METRICS:
        if row.scores is not None:
            ET.SubElement(props, "property", name=metric.name, value=str(row.score(metric.name)).lower())
    for key in ("turns", "termination", "assistant", "judge_model", "user_model", "cassette"):
        if getattr(row, key) is not None:
            ET.SubElement(props, "property", name=key, value=str(getattr(row, key)))
    missed = "; ".join(f"{s.metric} {s.value} below {s.floor}" for s in row.shortfalls)
    cause = row.error.message if row.error is not None else ""
    if verdict == "regression" and row.status == "error":
        ET.SubElement(case, "error", message=cause, type=row.error.kind if row.error else "error").text = cause
    elif verdict == "regression":
        text = missed or "did not reproduce its recorded result"
        ET.SubElement(case, "failure", message=text).text = text
    elif verdict == "expected failure":
        ET.SubElement(case, "skipped", type="pytest.xfail",
                      message=f"expected failure ({row.expected}): {missed or cause}")
    elif verdict == "not scored":
        ET.SubElement(case, "skipped", message=f"not scored (infrastructure): {cause}")
    elif verdict == "reply changed":
        ET.SubElement(case, "skipped", message=f"not scored: {cause}")
    return case


def _nested(element: ET.Element, level: int) -> str:
    """An element as it stands ``level`` deep in the indented document, from its line break on."""
    ET.indent(element, level=level)
    return "\n" + "  " * level + ET.tostring(element, encoding="unicode")


def _suite(report: RunReport, kind: str, suite_name: str) -> Iterator[str]:
    """One suite of cases, written case by case (a big run's file is never held whole)."""
    members = [(row, report.verdict.of(row.case_id, row.status)) for row in report.rows if row.task_kind == kind]
    if not members:
        return
    tag = ET.Element("testsuite", name=suite_name, tests=str(len(members)),
                     time=f"{sum(row.seconds for row, _ in members):.3f}",
                     failures=str(sum(v == "regression" and row.status != "error" for row, v in members)),
                     errors=str(sum(v == "regression" and row.status == "error" for row, v in members)),
                     skipped=str(sum(v in ("expected failure", "not scored", "reply changed") for _, v in members)))
    yield "\n  " + ET.tostring(tag, encoding="unicode").removesuffix(" />") + ">"
    for row, verdict in members:
        yield _nested(_case(report, row, suite_name, verdict), 2)
    yield "\n  </testsuite>"


def _run_checks(report: RunReport) -> ET.Element | None:
    checks = report.verdict.checks
    if not checks:
        return None
    suite = ET.Element("testsuite", name=RUN_SUITE, tests=str(len(checks)),
                       failures=str(sum(c.outcome == "failed" for c in checks)), errors="0",
                       skipped=str(sum(c.outcome == "skipped" for c in checks)), time="0.000")
    for check in checks:
        case = ET.SubElement(suite, "testcase", classname=RUN_SUITE, name=check.name, time="0.000")
        if check.outcome == "failed":
            ET.SubElement(case, "failure", message=check.message).text = check.message
        elif check.outcome == "skipped":
            ET.SubElement(case, "skipped", message=check.message)
        else:
            ET.SubElement(case, "system-out").text = check.message
    return suite


def junit_xml(report: RunReport, *, name: str = "personalens") -> Iterator[str]:
    root = ET.tostring(ET.Element("testsuites", name=name), encoding="unicode", xml_declaration=True)
    checks = _run_checks(report)
    if checks is None and not report.rows:
        yield root + "\n"
        return
    yield root.removesuffix(" />") + ">"
    for kind, suite_name in SUITES.items():
        yield from _suite(report, kind, suite_name)
    if checks is not None:
        yield _nested(checks, 1)
    yield "\n</testsuites>\n"

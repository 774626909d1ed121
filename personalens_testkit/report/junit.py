"""JUnit XML from a run report: one test case per scenario, its scores as properties, and one test case per
run-level check (each aggregate gate, the infrastructure errors, the baseline's coverage and comparison), so
a CI check view that reads JUnit is red exactly when the run is.

A case's element follows its verdict: a regression is a ``<failure>`` (an ``<error>`` when the bot failed
on it), a known failure and a case the benchmark's models could not score are ``<skipped>`` with the
reason, an unexpected pass passes with a ``verdict`` property saying so.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..results.rows import ResultRow
from ..scales import METRICS
from .model import RunReport

SUITES = {"sd": "test_single_domain", "md": "test_multi_domain"}
RUN_SUITE = "personalens_run"


def _case(suite: ET.Element, report: RunReport, row: ResultRow, suite_name: str) -> str:
    case = ET.SubElement(suite, "testcase", classname=f"suites.{suite_name}", name=row.case_id, time=f"{row.seconds:.3f}")
    verdict = report.verdict.of(row.case_id, row.status)
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
    return verdict


def junit_xml(report: RunReport, *, name: str = "personalens") -> str:
    root = ET.Element("testsuites", name=name)
    for kind, suite_name in SUITES.items():
        members = [r for r in report.rows if r.task_kind == kind]
        if not members:
            continue
        suite = ET.SubElement(root, "testsuite", name=suite_name, tests=str(len(members)),
                              time=f"{sum(r.seconds for r in members):.3f}")
        outcomes = [(_case(suite, report, row, suite_name), row.status) for row in members]
        suite.set("failures", str(sum(v == "regression" and s != "error" for v, s in outcomes)))
        suite.set("errors", str(sum(v == "regression" and s == "error" for v, s in outcomes)))
        suite.set("skipped", str(sum(v in ("expected failure", "not scored", "reply changed") for v, _ in outcomes)))
    checks = report.verdict.checks
    if checks:
        suite = ET.SubElement(root, "testsuite", name=RUN_SUITE, tests=str(len(checks)),
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
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"

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

from ..results.rows import USER_AGENT_VERDICT
from ..scales import METRICS
from .model import RunReport

SUITES = {"sd": "test_single_domain", "md": "test_multi_domain"}
RUN_SUITE = "personalens_run"


#: an element as :func:`_xml` writes it: tag, attributes in order, text (None: none), children
Element = tuple[str, list[tuple[str, str]], "str | None", list["Element"]]


def _case(report: RunReport, row: Any, suite_name: str, verdict: str) -> Element:
    props: list[Element] = [("property", [("name", "verdict"), ("value", verdict)], None, [])]
    if row.expected is not None:
        props.append(("property", [("name", "expected"), ("value", row.expected)], None, []))
    for metric in METRICS:
        if row.scores is not None:
            props.append(("property", [("name", metric.name), ("value", str(row.score(metric.name)).lower())], None, []))
    for key in ("turns", "termination", "assistant", "judge_model", "user_model", "cassette"):
        if getattr(row, key) is not None:
            props.append(("property", [("name", key), ("value", str(getattr(row, key)))], None, []))
    children: list[Element] = [("properties", [], None, props)]
    missed = "; ".join(f"{s.metric} {s.value} below {s.floor}" for s in row.shortfalls)
    cause = row.error.message if row.error is not None else ""
    if verdict == "regression" and row.status == "error":
        children.append(("error", [("message", cause), ("type", row.error.kind if row.error else "error")], cause, []))
    elif verdict == "regression":
        text = missed or "did not reproduce its recorded result"
        children.append(("failure", [("message", text)], text, []))
    elif verdict == "expected failure":
        children.append(("skipped", [("type", "pytest.xfail"),
                                     ("message", f"expected failure ({row.expected}): {missed or cause}")], None, []))
    elif verdict == "not scored":
        children.append(("skipped", [("message", f"not scored (infrastructure): {cause}")], None, []))
    elif verdict == "reply changed":
        children.append(("skipped", [("message", f"not scored: {cause}")], None, []))
    elif verdict == USER_AGENT_VERDICT:
        children.append(("skipped", [("message", f"{verdict}: {report.verdict.user_agent_why.get(row.case_id, '')}")],
                         None, []))
    attributes = [("classname", f"suites.{suite_name}"), ("name", row.case_id), ("time", f"{row.seconds:.3f}")]
    return ("testcase", attributes, None, children)


_ATTRIBUTE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\r": "&#13;", "\n": "&#10;",
                            "\t": "&#09;"})
_TEXT = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _xml(element: Element, level: int) -> str:
    """An element as ElementTree writes it ``level`` deep in a document indented by ``ET.indent`` (two spaces a
    level), from its line break on: the same bytes, a case's worth of strings instead of a tree (a run's JUnit
    file has one a case)."""
    tag, attributes, text, children = element
    head = "<" + tag + "".join(f' {name}="{value.translate(_ATTRIBUTE)}"' for name, value in attributes)
    if children:
        inner = "".join(_xml(child, level + 1) for child in children)
        if text and text.strip():  # ET.indent keeps a text that is not only white space
            inner = text.translate(_TEXT) + inner[inner.index("<"):]
        return "\n" + "  " * level + head + ">" + inner + "\n" + "  " * level + "</" + tag + ">"
    if text:
        return "\n" + "  " * level + head + ">" + text.translate(_TEXT) + "</" + tag + ">"
    return "\n" + "  " * level + head + " />"


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
                     skipped=str(sum(v in ("expected failure", "not scored", "reply changed", USER_AGENT_VERDICT)
                                     for _, v in members)))
    yield "\n  " + ET.tostring(tag, encoding="unicode").removesuffix(" />") + ">"
    for row, verdict in members:
        yield _xml(_case(report, row, suite_name, verdict), 2)
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

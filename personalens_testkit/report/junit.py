"""JUnit XML from result rows: one test case per scenario, its scores as properties.

CI systems read JUnit natively; the properties let them chart personalization and the
other scores per case. Failed cases carry their shortfalls, errors their cause.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..scales import METRICS
from .model import RunReport

SUITES = {"sd": "test_single_domain", "md": "test_multi_domain"}


def junit_xml(report: RunReport, *, name: str = "personalens") -> str:
    root = ET.Element("testsuites", name=name)
    for kind, suite_name in SUITES.items():
        members = [r for r in report.rows if r.task_kind == kind]
        if not members:
            continue
        suite = ET.SubElement(root, "testsuite", name=suite_name, tests=str(len(members)),
                              failures=str(sum(r.status == "failed" for r in members)),
                              errors=str(sum(r.status == "error" for r in members)),
                              time=f"{sum(r.seconds for r in members):.3f}")
        for row in members:
            case = ET.SubElement(suite, "testcase", classname=f"suites.{suite_name}", name=row.case_id,
                                 time=f"{row.seconds:.3f}")
            props = ET.SubElement(case, "properties")
            for metric in METRICS:
                if row.scores is not None:
                    ET.SubElement(props, "property", name=metric.name, value=str(row.score(metric.name)).lower())
            for key in ("turns", "termination", "assistant", "judge_model", "user_model", "cassette"):
                if getattr(row, key) is not None:
                    ET.SubElement(props, "property", name=key, value=str(getattr(row, key)))
            if row.status == "failed":
                text = "; ".join(f"{s.metric} {s.value} below {s.floor}" for s in row.shortfalls)
                ET.SubElement(case, "failure", message=text or "did not reproduce its recorded result").text = text
            elif row.status == "error" and row.error is not None:
                ET.SubElement(case, "error", message=row.error.message, type=row.error.kind).text = row.error.message
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"

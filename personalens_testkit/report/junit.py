"""JUnit XML from result rows: one test case per scenario, its scores as properties.

CI systems read JUnit natively; the properties let them chart personalization and the
other scores per case. Failed cases carry their shortfalls, errors their cause.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any, Mapping, Sequence

from ..data.models import case_id
from ..scales import METRICS

SUITES = {"sd": "test_single_domain", "md": "test_multi_domain"}


def junit_xml(rows: Sequence[Mapping[str, Any]], *, name: str = "personalens") -> str:
    root = ET.Element("testsuites", name=name)
    for kind, suite_name in SUITES.items():
        members = [r for r in rows if r.get("task_kind") == kind]
        if not members:
            continue
        suite = ET.SubElement(root, "testsuite", name=suite_name, tests=str(len(members)),
                              failures=str(sum(r["status"] == "failed" for r in members)),
                              errors=str(sum(r["status"] == "error" for r in members)),
                              time=f"{sum(r.get('seconds', 0) for r in members):.3f}")
        for row in members:
            case_name = case_id(row["scenario_id"], row.get("repeat"))
            case = ET.SubElement(suite, "testcase", classname=f"suites.{suite_name}", name=case_name,
                                 time=f"{row.get('seconds', 0):.3f}")
            props = ET.SubElement(case, "properties")
            for metric in METRICS:
                if row.get("scores"):
                    ET.SubElement(props, "property", name=metric.name, value=str(row["scores"][metric.name]).lower())
            for key in ("turns", "termination", "assistant", "judge_model", "user_model", "cassette"):
                if row.get(key) is not None:
                    ET.SubElement(props, "property", name=key, value=str(row[key]))
            if row["status"] == "failed":
                text = "; ".join(f"{s['metric']} {s['value']} below {s['floor']}" for s in row.get("shortfalls", []))
                ET.SubElement(case, "failure", message=text or "did not reproduce its recorded result").text = text
            elif row["status"] == "error":
                error = row.get("error") or {}
                ET.SubElement(case, "error", message=str(error.get("message", "")), type=str(error.get("kind", ""))).text = (
                    str(error.get("message", "")))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"

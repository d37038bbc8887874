"""What a report holds (``report/results.py``): a stage found by name, ``report.json``'s content
as plain JSON (on the hand-made report of ``test_report.py``)."""

from __future__ import annotations

import json

from sparse_adapt.report.files import to_json
from sparse_adapt.report.results import REFERENCE
from tests.report.test_report import _hand_report


def test_a_stage_is_found_by_its_name():
    report = _hand_report()
    assert report.stage("H1") is report.stages[1]
    assert report.stage(REFERENCE) is report.stages[0]


def test_report_json_holds_every_stage_as_plain_objects():
    report = _hand_report()
    saved = json.loads(to_json(report.to_dict()))
    assert [s["name"] for s in saved["stages"]] == [REFERENCE, "H1"]
    assert saved["stages"][1]["explanations"]["q11"][0] == {"rank": 1, "doc_id": "d21", "score": 4.5,
                                                            "shared": [["gat", 2.25]]}
    assert [c["status"] for c in saved["stages"][0]["criteria"]] == ["pass", "fail", "n/a"]
    assert saved["stages"][1]["judged"] == {"queries": 3, "held-out queries": 2}


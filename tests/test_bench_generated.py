"""bench.generated: the suite's generated inputs, dumped and compared across commits."""

from __future__ import annotations

import json

from bench.generated import differences, generate, main


def test_a_dump_holds_every_generated_input_and_a_comparison_finds_a_changed_query(tmp_path, capsys):
    dump = generate(["gatrocraptic"], ["offline-splade-tiny"], [0])
    assert set(dump) == {"hand/gatrocraptic", "offline-splade-tiny/gatrocraptic"}
    mined = dump["offline-splade-tiny/gatrocraptic"]
    assert "Gatrocraptic" in mined["terms"]["jargon"] and mined["candidates"][:1]
    assert {e["term"] for e in mined["dictionary"]} and mined["queries"]["0"]
    assert dump["hand/gatrocraptic"]["candidates"] is None  # the hand-written terms were not mined
    changed = json.loads(json.dumps(dump))
    changed["hand/gatrocraptic"]["queries"]["0"][0][2] += " more"
    assert differences(dump, changed) == ["hand/gatrocraptic: queries differ"]
    assert differences(dump, {}) == [f"{k}: only in the old dump" for k in sorted(dump)]

    old = tmp_path / "old.json"
    old.write_text(json.dumps(changed))
    argv = ["--domains", "gatrocraptic", "--bases", "offline-splade-tiny", "--seeds", "0"]
    assert main(argv + ["--out", str(tmp_path / "a.json"), "--compare", str(old)]) == 1
    assert "hand/gatrocraptic: queries differ" in capsys.readouterr().out
    assert main(argv + ["--out", str(tmp_path / "b.json"), "--compare", str(tmp_path / "a.json")]) == 0  # deterministic
    assert "nothing differs" in capsys.readouterr().out

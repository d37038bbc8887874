"""``benchmark.md`` from constructed result records: the per-domain table, the bar, the
ablation table and the rendered file, each read off by hand (``test_benchmark.py`` runs the
command itself)."""

from __future__ import annotations

import codecs
import json

import pytest

from sparse_adapt.errors import ConfigError
from sparse_adapt.report.benchmark_md import (
    CORPUS_BAR, _fewer_seeds, ablation_table, bar_status, bar_summary, benchmark_differences, benchmark_section,
    domain_table, load_benchmark, render_benchmark,
)

SEM, EXP, CTL = "heldout-domain-semantic", "heldout-domain-explicit", "heldout-control"


def _row(domain, seed, variant, split="test", **groups):
    """A result record; ``groups``: group -> nDCG@10 (``control`` is a training group)."""
    names = {"sem": SEM, "exp": EXP, "ctl": CTL, "control": "control"}
    return {"domain": domain, "split": split, "seed": seed, "variant": variant,
            "groups": {names[g]: {"queries": 4, "ndcg@10": v} for g, v in groups.items()}}


def test_the_domain_table_puts_the_held_out_groups_first_and_shows_a_zero_as_a_figure():
    # the training group comes first in the records but the bar's groups lead the table; a 0.0
    # nDCG is a measured figure, not a missing seed
    results = [_row("a", None, "base", control=0.7, sem=0.5, ctl=0.9),
               _row("a", 0, "full", control=0.6, sem=0.8, ctl=0.8),
               _row("a", 1, "full", control=0.0, sem=0.9, ctl=0.96)]
    assert domain_table(results, [0, 1])[2:] == [
        "| a | test | heldout-domain-semantic | 4 | 0.500 | 0.800 | 0.900 | 0.850 | +0.350 | fail |",
        "| a | test | heldout-control | 4 | 0.900 | 0.800 | 0.960 | 0.880 | -0.020 | fail |",
        "| a | test | control | 4 | 0.700 | 0.600 | 0.000 | 0.300 | -0.400 |  |",
    ]


def test_the_domain_table_s_header_and_rule_have_as_many_columns_as_its_rows():
    # one column per seed: a rule one cell short breaks the Markdown table
    results = [_row("a", None, "base", sem=0.5), *(_row("a", s, "full", sem=0.9) for s in (0, 1, 2))]
    table = domain_table(results, [0, 1, 2])
    assert table[0] == ("| domain | split | group | queries | base | seed 0 | seed 1 | seed 2 | mean | mean - base "
                        "| bar |")
    assert table[1] == "|---|---|---|---|---|---|---|---|---|---|---|"
    assert table[2] == ("| a | test | heldout-domain-semantic | 4 | 0.500 | 0.900 | 0.900 | 0.900 | 0.900 | +0.400 "
                        "| pass |")


def test_a_domain_with_no_adapted_run_of_these_seeds_has_no_row_and_no_bar_line():
    """A base-only domain (its runs not measured) would show a row of dashes and a bar of 'n/a'."""
    results = [_row("b", None, "base", sem=0.5), _row("a", None, "base", sem=0.5), _row("a", 1, "full", sem=0.95)]
    assert [line.split(" | ")[0] for line in domain_table(results, [0, 1])[2:]] == ["| a"]
    # a seed not measured is a dash in its column, and the bar is then not met
    assert domain_table(results, [0, 1])[2] == "| a | test | heldout-domain-semantic | 4 | 0.500 | - | 0.950 | 0.950 | +0.450 |  |"
    assert bar_summary(results, [0, 1]) == ["- **a** (test): semantic n/a"]
    assert bar_summary(results, [1]) == ["- **a** (test): semantic pass"]
    assert _fewer_seeds(results, [0, 1]) == ["Left out (measured on fewer seeds): a."]  # not b: nothing adapted


def test_the_bar_reads_each_held_out_group_and_no_base_means_no_relative_bar():
    assert bar_status(EXP, 0.5, [0.91, 0.95]) == "pass"
    assert bar_status(EXP, 0.5, [0.91, 0.89]) == "fail"  # the explicit floor is 0.90 too
    # a base without a value (a group it had no judged query of) gives no relative bar, not a crash
    assert bar_status(CTL, None, [0.9]) == ""
    assert bar_status(SEM, None, [0.9], CORPUS_BAR) == ""


def test_the_ablation_table_reads_off_each_variant_by_hand():
    # Domain a has semantic and control, domain e explicit alone: one column per group a domain has.
    # e's full run scored no explicit query (None): no change is computed against it.
    results = [_row("a", None, "base", sem=0.5, ctl=0.9), _row("a", 0, "full", sem=0.8, ctl=0.8),
               _row("a", 1, "full", sem=0.2, ctl=0.2), _row("a", 0, "no-pres", sem=0.7, ctl=0.5),
               _row("e", None, "base", exp=0.4), _row("e", 0, "full", exp=None), _row("e", 0, "no-dom", exp=0.3)]
    table = ablation_table(results, [0])
    assert table[0] == "| variant | a semantic | a control | e explicit | mean change vs full |"
    # base: 0.5 - 0.8 and 0.9 - 0.8 -> mean -0.100 (e's column has no full value to compare with)
    assert table[2] == "| base | 0.500 | 0.900 | 0.400 | -0.100 |"
    assert table[3] == "| full | 0.800 | 0.800 | - | - |"  # seed 0 alone: the ablation's seeds
    assert "| no-pres | 0.700 | 0.500 | - | -0.200 |" in table
    assert "| no-dom | - | - | 0.300 | - |" in table
    # no variant without a term: no ablation table, and no section in the file
    assert ablation_table(results[:3], [0]) == []


def _report(**extra):
    """A schema /1 file (before `--pipeline`), as `report --benchmark` still reads it."""
    return {"schema": "sparse-adapt.benchmark/1", "created": "2026-11-22T00:00:00+00:00",
            "inputs": {"base": "offline-minilm", "domains": ["a"], "seeds": [0, 1], "ablation_domains": [],
                       "ablation_seeds": [0], "config": {}},
            "results": [{**_row("a", None, "base", sem=0.5), "model": "m"},
                        {**_row("a", 0, "full", sem=0.8), "selection": {"best_epoch": 2, "epochs_run": 3}},
                        {**_row("a", 1, "full", sem=0.9), "selection": {"best_epoch": 1, "epochs_run": 4}}],
            **extra}


def test_a_file_without_a_pipeline_renders_as_train_s_h4_with_its_selected_epochs():
    md = render_benchmark(_report()).splitlines()
    assert md[2].startswith("Base `offline-minilm`, H4 (extend, warmup, dictionary, distill), seeds 0, 1;")
    assert "held-out domain-semantic >= 0.90, held-out domain-explicit >= 0.90" in md[2]
    assert "## Ablation: each loss term removed in turn" not in md
    epochs = md.index("| domain | seed | variant | best epoch | epochs run |")
    assert md[epochs + 2:] == ["| a | 0 | full | 2 | 3 |", "| a | 1 | full | 1 | 4 |"]


def test_a_file_without_a_stored_pooled_test_is_tested_over_the_benchmark_s_seeds():
    # q1: base 0.5, seeds 1.0 and 0.6 -> 0.8 (+0.300); the ablation's seed 0 alone would say 1.000
    report = _report()
    for r, v in zip(report["results"], (0.5, 1.0, 0.6)):
        r["groups"][SEM]["per_query"] = {"q1": v}
    assert "| test | semantic | 1 | 0.500 | 0.800 | +0.300 | 1 / 0 / 0 | 1.000 |" in render_benchmark(report)


def test_benchmark_differences_of_an_adapt_benchmark_and_of_an_older_config():
    # adapt without a pretrained start: the pipeline differs, its start is the base itself
    adapt = {"inputs": {"base": "b", "pipeline": "adapt", "start": "b", "config": {}}}
    assert benchmark_differences(adapt, "b", {}) == ["pipeline adapt (this report: train's H4)"]
    # a pipeline this version does not know (a newer file's) is not taken for train's H4
    future = {"inputs": {"base": "b", "pipeline": "future", "config": {}}}
    assert benchmark_differences(future, "b", {}) == ["pipeline future (this report: train's H4)"]
    # a key the benchmark's config lacks (written before the key existed) is no difference
    older = {"inputs": {"base": "b", "config": {"warmup": {"lr": 1e-3}}}}
    assert benchmark_differences(older, "b", {"warmup": {"lr": 1e-3, "epochs": 2}, "distill": {"pres": 2.0}}) == []


@pytest.mark.parametrize("change, message", [
    ({"results": {}}, "fields 'inputs' and 'results' are required"),
    # a 400-digit metric is a number JSON reads, and too large for any float
    ({"results": [_row("a", None, "base", sem=10 ** 400), _row("a", 0, "full", sem=0.5)]},
     r"not a complete benchmark result \(OverflowError"),
    ({"inputs": []}, "fields 'inputs' and 'results' are required"),
    # a record whose groups are a list: its group values cannot be read
    ({"results": [{**_row("a", None, "base"), "groups": []}, _row("a", 0, "full", sem=0.5)]},
     r"not a complete benchmark result \(AttributeError"),
])
def test_a_benchmark_file_whose_records_cannot_be_tables_is_one_error(tmp_path, change, message):
    (tmp_path / "benchmark.json").write_text(json.dumps(_report(**change)))
    with pytest.raises(ConfigError, match=message):
        load_benchmark(tmp_path)


def test_a_benchmark_file_saved_with_a_byte_order_mark_loads(tmp_path):
    # an editor's UTF-8 BOM: every other input file of ours is read past it
    (tmp_path / "benchmark.json").write_bytes(codecs.BOM_UTF8 + json.dumps(_report()).encode())
    assert load_benchmark(tmp_path) == _report()


def test_the_held_out_groups_lead_in_the_bar_s_order_whatever_order_the_records_hold():
    # query_groups.json may list the control first: the table follows the bar line's order
    results = [_row("a", None, "base", ctl=0.9, exp=0.4, sem=0.5), _row("a", 0, "full", ctl=0.9, exp=0.95, sem=0.95)]
    assert [line.split(" | ")[2] for line in domain_table(results, [0])[2:]] == [SEM, EXP, CTL]


def _corpus_report():
    """An adapt-corpus file: semantic 0.50 -> 0.65, +0.15 passes base + 0.10 and would fail the 0.90 floor."""
    return {"schema": "sparse-adapt.benchmark/2", "created": "2026-11-22T00:00:00+00:00",
            "inputs": {"base": "offline-minilm", "pipeline": "adapt-corpus", "domains": ["a"], "seeds": [0],
                       "ablation_domains": [], "ablation_seeds": [0], "config": {}},
            "results": [_row("a", None, "base", sem=0.5), _row("a", 0, "full", sem=0.65)]}


def test_an_adapt_corpus_file_marks_its_own_bar_in_the_heading_the_table_and_the_bar_line():
    md = render_benchmark(_corpus_report()).splitlines()
    assert "Bar: held-out domain-semantic >= base + 0.10, held-out controls >= base - 0.02, for every seed." in md[2]
    assert "| a | test | heldout-domain-semantic | 4 | 0.500 | 0.650 | 0.650 | +0.150 | pass |" in md
    assert "- **a** (test): semantic pass" in md
    assert domain_table(_corpus_report()["results"], [0], CORPUS_BAR)[2].endswith("| +0.150 | pass |")


def test_the_ablation_table_s_rule_has_a_cell_per_column():
    results = [_row("a", None, "base", sem=0.5, ctl=0.9), _row("a", 0, "full", sem=0.8, ctl=0.8),
               _row("a", 0, "no-pres", sem=0.7, ctl=0.5)]
    table = ablation_table(results, [0])
    assert table[0] == "| variant | a semantic | a control | mean change vs full |"
    assert table[1] == "|---|---|---|---|"


def test_the_ablation_table_averages_each_variant_over_the_ablation_s_seeds():
    # full 0.8 and 0.6 -> 0.700, no-pres 0.7 and 0.3 -> 0.500: -0.200 (seed 0 alone would say -0.100)
    results = [_row("a", None, "base", sem=0.5), _row("a", 0, "full", sem=0.8), _row("a", 1, "full", sem=0.6),
               _row("a", 0, "no-pres", sem=0.7), _row("a", 1, "no-pres", sem=0.3)]
    table = ablation_table(results, [0, 1])
    assert table[3] == "| full | 0.700 | - |"
    assert "| no-pres | 0.500 | -0.200 |" in table


def test_a_file_renders_no_section_it_has_nothing_for():
    # no generation options, no per-query values, no ablation, and `selection` {} as written
    # for runs without validation: none of those sections, not an empty one
    report = _report()
    for r in report["results"]:
        r["selection"] = {}
    md = render_benchmark(report)
    for absent in ("Options given to every `adapt`", "## Pooled by split", "## Ablation", "## Selected distill epochs"):
        assert absent not in md


def test_the_ablation_and_the_pooled_test_each_read_their_own_seeds():
    # seeds 0,1, ablation seed 0: a's full column is seed 0's 0.8 (not the 0.7 of both seeds);
    # c, measured on seed 0 alone, is named as left out of the pooled test of seeds 0,1
    def row(domain, seed, variant, v):
        r = _row(domain, seed, variant, sem=v)
        r["groups"][SEM]["per_query"] = {"q": v}
        return r

    report = _report(results=[row("a", None, "base", 0.5), row("a", 0, "full", 0.8), row("a", 1, "full", 0.6),
                              row("a", 0, "no-pres", 0.7), row("c", None, "base", 0.5), row("c", 0, "full", 0.9)])
    md = render_benchmark(report).splitlines()
    assert "| full | 0.800 | - |" in md and "| no-pres | 0.700 | -0.100 |" in md
    assert "Left out (measured on fewer seeds): c." in md


def test_a_benchmark_file_that_is_no_json_object_is_one_error(tmp_path):
    (tmp_path / "benchmark.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="field 'schema' is not one of"):
        load_benchmark(tmp_path)


def test_a_directory_holding_only_a_pooled_result_is_read_by_that_file(tmp_path):
    (tmp_path / "benchmark-adapt-corpus-pool.json").write_text(json.dumps(_report()))
    assert load_benchmark(tmp_path) == _report()


def test_the_report_s_section_drops_the_benchmark_s_own_title():
    section = benchmark_section(_report()).splitlines()
    assert section[0] == "## Generalisation: the benchmark suite"
    assert not any("Benchmark: adapting domains" in line for line in section)
    assert "### Per domain: base vs adapted" in section


def test_the_config_line_names_each_setting_a_config_changed():
    """A benchmark or report trained with 1-epoch stages read like one made with the defaults:
    only the JSON recorded the config."""
    from sparse_adapt.report.benchmark_md import config_line, config_overrides

    defaults = {"distill": {"epochs": 10, "lr": 2e-5}, "warmup": {"epochs": 10}}
    config = {"distill": {"epochs": 2, "lr": 2e-5}, "warmup": {"epochs": 10}}
    assert config_overrides(config, defaults) == {"distill.epochs": 2}
    assert config_overrides(defaults, defaults) == {}
    assert config_line({"distill.epochs": 2, "distill.pres_form": "vectors"}) == (
        "Training config: the defaults (with the settings recommended for the base) except `distill.epochs = 2`, "
        "`distill.pres_form = 'vectors'`.")
    assert config_line({}) == "Training config: the defaults (with the settings recommended for the base)."
    assert "inputs.config" in config_line(None)  # a file written before overrides were recorded

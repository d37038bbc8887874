"""The report's four plots, read off the figures before they become PNG bytes: what each bar,
cell and line shows for a hand-made two-stage report (``test_report.py``'s ``_hand_report``)."""

from __future__ import annotations

import dataclasses

import pytest
from matplotlib.colors import to_hex

import sparse_adapt.report.figures as figures_module
from tests.report.test_report import _hand_report


@pytest.fixture
def drawn(monkeypatch):
    """figures(report) as the matplotlib figures themselves (the PNG bytes hide what was drawn)."""
    monkeypatch.setattr(figures_module, "_png", lambda fig: fig)
    return figures_module.figures


def test_the_criteria_grid_colours_and_names_each_cell_first_criterion_on_top(drawn):
    ax = drawn(_hand_report())["criteria"].axes[0]
    # column-major: base's c0, c1, c2 (pass, fail, n/a), then H1's (pass, pass, n/a)
    assert [to_hex(p.get_facecolor()) for p in ax.patches] == [
        "#2e7d32", "#c62828", "#9e9e9e", "#2e7d32", "#2e7d32", "#9e9e9e"]
    assert [t.get_text() for t in ax.texts] == ["pass", "fail", "n/a", "pass", "pass", "n/a"]
    assert ax.get_ylim() == (3, 0)  # the rows read top-down in the criteria's order


def test_each_stage_s_group_bar_is_its_own_value_and_a_group_without_one_is_drawn_at_zero(drawn):
    ax = drawn(_hand_report())["groups"].axes[0]
    # groups domain-semantic, held-out semantic (no judged query: None), control; two stages
    # side by side, each bar 0.8 / 2 wide, base left of the group's tick and H1 right of it
    bars = [(round(p.get_x() + p.get_width() / 2, 6), p.get_height()) for p in ax.patches]
    assert bars == [(-0.2, 0.25), (0.8, 0.0), (1.8, 0.75), (0.2, 0.6251), (1.2, 0.0), (2.2, 0.75)]


def test_the_term_plot_draws_the_primary_term_bold_and_a_multi_token_term_at_zero(drawn):
    ax_w, ax_r = drawn(_hand_report())["term"].axes
    lines = {line.get_label(): line for line in ax_w.get_lines() if not line.get_label().startswith("_")}
    assert list(lines["Gatrocraptic"].get_ydata()) == [0.5, 2.3333]
    assert (lines["Gatrocraptic"].get_linewidth(), lines["Gatrocraptic"].get_color()) == (2.6, "black")
    assert list(lines["API"].get_ydata()) == [0.0, 0.0]  # not one token: no weight of its own
    assert lines["API"].get_linewidth() == 1.0
    # the rank plot leaves out the stage whose weight is 0 (rank None), on a log axis
    ranks = {line.get_label(): line for line in ax_r.get_lines()}
    assert (list(ranks["Gatrocraptic"].get_xdata()), list(ranks["Gatrocraptic"].get_ydata())) == ([1], [1])
    assert ax_r.get_yscale() == "log" and not ax_r.texts


def test_sparsity_bars_are_documents_left_and_queries_right_without_queries_at_zero(drawn):
    report = _hand_report()
    h1 = report.stages[1]
    report.stages[1] = dataclasses.replace(h1, sparsity={**h1.sparsity, "doc_nonzero_mean": 20.0,
                                                          "query_nonzero_mean": None})
    ax = drawn(report)["sparsity"].axes[0]
    assert [(round(p.get_x() + 0.2, 6), p.get_height()) for p in ax.patches] == [
        (-0.2, 12.26), (0.8, 20.0), (0.2, 5.5), (1.2, 0.0)]


def test_the_criteria_grid_names_each_column_at_its_cell_s_centre_and_the_primary_term_in_its_title(drawn):
    ax = drawn(_hand_report())["criteria"].axes[0]
    # each cell is 0.96 wide from its column's left edge: its centre is column + 0.48
    assert [(t.get_position()[0], t.get_text()) for t in ax.get_xticklabels()] == [(0.48, "base"), (1.48, "H1")]
    assert ax.get_xlim() == (0, 2)  # both columns whole, the last one included
    assert ax.get_title() == 'Criteria for "Gatrocraptic" per stage'


def test_the_term_plot_ranks_1_on_top_marks_the_high_weight_and_fades_the_other_terms(drawn):
    from diagnostics.term import HIGH_WEIGHT

    ax_w, ax_r = drawn(_hand_report())["term"].axes
    assert ax_r.yaxis_inverted()  # rank 1 is the best: drawn at the top
    assert [list(line.get_ydata()) for line in ax_w.get_lines() if line.get_label().startswith("_")] == \
        [[HIGH_WEIGHT, HIGH_WEIGHT]]  # the dashed bar a domain term's weight is read against
    alpha = {line.get_label(): line.get_alpha() for line in ax_w.get_lines()}
    assert (alpha["Gatrocraptic"], alpha["API"]) == (1.0, 0.45)


def test_the_rank_plot_says_so_when_no_term_is_active_in_any_stage(drawn):
    report = _hand_report()
    report.stages = [dataclasses.replace(s, terms={t: dataclasses.replace(v, weight=0.0, rank=None)
                                                   for t, v in s.terms.items()}) for s in report.stages]
    _, ax_r = drawn(report)["term"].axes
    # no point to draw: an empty plot would read as a plotting failure, so it says why
    assert [t.get_text() for t in ax_r.texts] == ["no domain term is active in any stage"]
    assert ax_r.get_lines() == [] and ax_r.get_yscale() == "linear"


def test_each_criteria_cell_sits_in_its_stage_s_column_and_its_criterion_s_row(drawn):
    ax = drawn(_hand_report())["criteria"].axes[0]
    # three criteria by two stages: a transposed grid would put H1's cells in row 1 of column 0-2
    assert [p.get_xy() for p in ax.patches] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]


def test_the_group_legend_and_the_sparsity_axis_name_each_stage_in_order(drawn):
    got = drawn(_hand_report())
    assert [t.get_text() for t in got["groups"].axes[0].get_legend().get_texts()] == ["base", "H1"]
    sparsity = got["sparsity"].axes[0]
    assert [(t.get_position()[0], t.get_text()) for t in sparsity.get_xticklabels()] == [(0, "base"), (1, "H1")]

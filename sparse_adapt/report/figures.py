"""The report's four plots as PNG bytes (matplotlib, headless)."""

from __future__ import annotations

import io

from sparse_adapt.report.criteria import FAIL, NA, PASS
from sparse_adapt.report.results import GROUP_METRIC, Report

_COLORS = {PASS: "#2e7d32", FAIL: "#c62828", NA: "#9e9e9e"}


def figures(report: Report) -> dict[str, bytes]:
    """The four plots as PNG bytes.

    Bare ``Figure`` objects print through matplotlib's Agg canvas without touching pyplot's
    global backend, so this works headless and leaves a notebook's inline backend alone.
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    stages = report.stages
    names = [s.name for s in stages]
    x = list(range(len(stages)))
    out = {}

    # Criteria grid: rows = criteria, columns = stages, cell = pass/fail/n/a.
    crit = [c.name for c in stages[0].criteria] if stages else []
    fig = Figure(figsize=(1.6 + 1.3 * len(stages), 0.9 + 0.45 * len(crit)))
    ax = fig.add_subplot()
    for col, s in enumerate(stages):
        for row, c in enumerate(s.criteria):
            ax.add_patch(Rectangle((col, row), 0.96, 0.92, color=_COLORS[c.status]))
            ax.text(col + 0.48, row + 0.46, {PASS: "pass", FAIL: "fail", NA: "n/a"}[c.status],
                    ha="center", va="center", color="white", fontsize=9)
    ax.set_xlim(0, len(stages))
    ax.set_ylim(len(crit), 0)
    ax.set_xticks([i + 0.48 for i in x], names)
    ax.set_yticks([i + 0.46 for i in range(len(crit))], crit)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(f'Criteria for "{report.primary_term}" per stage')
    fig.tight_layout()
    out["criteria"] = _png(fig)

    # nDCG@10 per query group: grouped bars, one colour per stage.
    groups = list(report.groups)
    fig = Figure(figsize=(max(6.0, 1.4 * len(groups) + 2), 4.2))
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(stages))
    for k, s in enumerate(stages):
        vals = [s.groups[g][GROUP_METRIC] for g in groups]
        ax.bar([g + (k - (len(stages) - 1) / 2) * width for g in range(len(groups))],
               [v if v is not None else 0.0 for v in vals], width, label=s.name)
    ax.set_xticks(range(len(groups)), groups, rotation=15, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(GROUP_METRIC)
    ax.set_title(f"{GROUP_METRIC} per query group and stage")
    ax.legend(ncols=min(5, len(stages)), fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.28))
    fig.tight_layout()
    out["groups"] = _png(fig)

    # Domain-term weight and rank per stage; the primary term drawn bold.
    from diagnostics.term import HIGH_WEIGHT

    fig = Figure(figsize=(12.5, 4.4))
    ax_w, ax_r = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    ranked = False
    for t in (stages[0].terms if stages else {}):
        primary = t == report.primary_term
        style = dict(lw=2.6 if primary else 1.0, alpha=1.0 if primary else 0.45, marker="o", label=t,
                     zorder=3 if primary else 2, **({"color": "black"} if primary else {}))
        weights = [s.terms[t].weight if s.terms[t].single_token else 0.0 for s in stages]
        ax_w.plot(x, weights, **style)
        ranks = [(i, s.terms[t].rank) for i, s in zip(x, stages) if s.terms[t].rank]
        if ranks:
            ranked = True
            ax_r.plot([i for i, _ in ranks], [r for _, r in ranks], **style)
    if ranked:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax_r.set_yscale("log")  # ranks run from 1 to the thousands
        ax_r.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax_r.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax_r.yaxis.set_minor_formatter(NullFormatter())
    else:
        ax_r.text(0.5, 0.5, "no domain term is active in any stage", ha="center", va="center",
                  transform=ax_r.transAxes, color="grey")
    ax_w.axhline(HIGH_WEIGHT, color="grey", ls="--", lw=1)
    ax_w.set_title("weight in the first document using the term")
    ax_w.set_ylabel("SPLADE weight (0 = inactive or not one token)")
    ax_r.set_title("rank among that document's active tokens")
    ax_r.set_ylabel("rank (1 = top; no point = weight 0)")
    ax_r.invert_yaxis()
    for ax in (ax_w, ax_r):
        ax.set_xticks(x, names)
        ax.grid(alpha=0.3)
    handles, labels = ax_w.get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=8)
    fig.tight_layout(rect=(0, 0, 0.85, 1))
    out["term"] = _png(fig)

    # Sparsity: mean active tokens per document and per query.
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    docs = [s.sparsity["doc_nonzero_mean"] for s in stages]
    qs = [s.sparsity["query_nonzero_mean"] or 0.0 for s in stages]
    ax.bar([i - 0.2 for i in x], docs, 0.4, label="per document")
    ax.bar([i + 0.2 for i in x], qs, 0.4, label="per query")
    ax.set_xticks(x, names)
    ax.set_ylabel("mean non-zero tokens")
    ax.set_title("Sparsity per stage")
    ax.legend()
    fig.tight_layout()
    out["sparsity"] = _png(fig)
    return out


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()

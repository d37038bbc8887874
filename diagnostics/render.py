"""Rich rendering of the diagnostics' plain data (nothing is computed here but a table's subtotals and ratios)."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from diagnostics.explain import QueryExplanation
from diagnostics.sparsity import CorpusStats
from diagnostics.term import FAIL, NA, PASS, TOP_RANK, WARN, TermDiagnosis
from sparse_adapt.progress import counted

# Positions always shown in the logit table (the spec shows the first 25); occurrences and
# the position of the maximum are added beyond it, the rest is elided.
SHOWN_POSITIONS = 25
# Shared tokens listed per document in `explain` (the JSON has all of them).
SHOWN_SHARED = 10
SHOWN_QUERY_TOKENS = 30

STATUS_STYLE = {PASS: ("✓", "green"), WARN: ("!", "yellow"), FAIL: ("✗", "bold red"), NA: ("–", "dim")}


# The logits section's verdict on the token's occurrences, as (line, style). "negative" covers a
# logit of exactly 0 too: log1p(relu(0)) gives no weight, so the line says "at or below 0".
VERDICT_LINES = {
    "negative": ("  ⚠ the token occurs in the text but every logit there is at or below 0: the MLM head does not "
                 "predict it", "bold red"),
    "mixed": ("  ⚠ some occurrence logits are at or below 0", "yellow"),
    "positive": ("  ✓ positive logits where the token occurs", "green"),
}


def _status(status: str, label: str | None = None) -> Text:
    mark, style = STATUS_STYLE[status]
    return Text(f"{mark} {label or status}", style=style)


def _yes_no(ok: bool, yes: str = "yes", no: str = "no") -> Text:
    return _status(PASS if ok else FAIL, yes if ok else no)


def _logit(x: float) -> Text:
    return Text(f"{x:.4f}", style="green" if x > 0 else "red")


def _short(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _cell(check) -> str:
    """A compact value for a per-piece check cell."""
    if check.name == "weight_matches_encoding":
        return "matches" if check.status == PASS else f"MISMATCH {check.actual}"
    return check.actual


def _section(console: Console, number: int, title: str) -> None:
    console.print()
    console.print(Rule(f"[bold][{number}] {title}[/bold]", align="left", style="cyan"))


# ---------------------------------------------------------------------------- diagnose
def render_term(d: TermDiagnosis, console: Console) -> None:
    v, doc = d.vocabulary, d.document
    failed = [c for c in d.checks if c.status == FAIL]
    warned = [c for c in d.checks if c.status == WARN]
    verdict = (
        Text(f"✗ {len(failed)} check(s) failed", style="bold red")
        if failed
        else Text(f"! {len(warned)} warning(s)", style="yellow") if warned else Text("✓ all checks passed", style="bold green")
    )
    console.print(Panel(Group(Text.assemble(("model: ", "dim"), d.model), verdict),
                        title=f"[bold]Token diagnostic: '{escape(d.term)}'[/bold]", expand=False))
    for w in d.warnings:
        console.print(Text(f"⚠ {w}", style="yellow"))

    # [1] vocabulary
    _section(console, 1, "Vocabulary check")
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("Token id(s)", " ".join(map(str, v.token_ids)))
    grid.add_row("Pieces", escape(" ".join(v.pieces)))
    grid.add_row("Decoded", escape(repr(v.decoded)))
    split = f"no: {counted(len(v.token_ids), 'piece')}"
    if len(v.token_ids) == 1:  # one piece yet no single token: [UNK], characters the tokenizer does not know
        split += f" ({v.pieces[0]}: the tokenizer does not know its characters)"
    grid.add_row("Single token", _yes_no(v.single_token, f"yes (id {v.token_ids[0]})", split))
    if v.base_pieces is not None:
        grid.add_row("Base tokenizer split", escape(" ".join(v.base_pieces)) + f"  ({len(v.base_pieces)} piece(s))")
    grid.add_row("Added by extend-vocab", "yes" if v.added_token else "no")
    if v.single_token:
        grid.add_row("Domain token of model", _yes_no(v.domain_token))
    if v.terms_file is None:
        grid.add_row("Terms file", Text("not given", style="dim"))
    else:
        grid.add_row("In terms file", _yes_no(v.in_terms_file, f"yes, category {', '.join(v.categories)}", "no"))
        grid.add_row("", Text(v.terms_file, style="dim"))
    console.print(grid)

    # [2] logits
    _section(console, 2, "MLM logit analysis")
    where = {
        "first": f"one of {len(doc.docs_containing)} document(s) containing the term: {', '.join(doc.docs_containing)}",
        "doc": "chosen with --doc",
        "probe": "probe: the term on its own (no document contains it)",
    }[doc.source]
    console.print(Text.assemble(("Document ", "bold"), (doc.doc_id or "(probe)", "bold magenta"), f"  {where}"))
    console.print(Text(_short(doc.text, 240), style="italic"))
    spans = ", ".join(str(s) if e - s == 1 else f"{s}-{e - 1}" for s, e in doc.term_spans)
    console.print(f"Term at token position(s): {spans or 'none'}   ({doc.num_tokens} tokens, special tokens included)")
    targets = d.targets
    shown = set(range(min(SHOWN_POSITIONS, doc.num_tokens)))
    for t in targets:
        shown.update(t.logits.occurrences)
        shown.add(t.logits.max_position)
    # "max" is also written out: underlining is lost where output is no terminal (a log, a pipe)
    table = Table(box=box.SIMPLE_HEAD, caption="underlined, and marked max: the max over positions (what SPLADE pools)",
                  caption_justify="left")
    table.add_column("pos", justify="right")
    table.add_column("token", no_wrap=True)
    for t in targets:
        table.add_column(escape(t.token) if len(targets) > 1 else f"logit '{escape(t.token)}'", justify="right",
                         no_wrap=True)
    table.add_column("", no_wrap=True)
    in_span = {p for s, e in doc.term_spans for p in range(s, e)}
    prev = -1
    for p in sorted(shown):
        if p > prev + 1:
            table.add_row("…", Text(f"{p - prev - 1} more", style="dim"), *[""] * len(targets), "")
        cells = []
        for t in targets:
            cell = _logit(t.logits.positions[p].logit)
            if t.logits.max_position == p:
                cell.stylize("underline bold")
            cells.append(cell)
        maxed = [t.token for t in targets if t.logits.max_position == p]
        marks = (["term"] if p in in_span else []) + (
            [("max " + " ".join(maxed)) if len(targets) > 1 else "max"] if maxed else [])
        table.add_row(str(p), escape(targets[0].logits.positions[p].token), *cells,
                      Text("◀ " + ", ".join(marks) if marks else "", style="bold cyan"))
        prev = p
    if prev < doc.num_tokens - 1:
        table.add_row("…", Text(f"{doc.num_tokens - 1 - prev} more", style="dim"), *[""] * len(targets), "")
    console.print(table)
    for t in targets:
        lg = t.logits
        line = Text.assemble((f"'{t.token}': ", "bold"), f"all positions min {lg.min_logit:.4f}, max {lg.max_logit:.4f}")
        if lg.occurrence_mean is not None:
            line.append(f"; at occurrences min {lg.occurrence_min:.4f}, max {lg.occurrence_max:.4f}, "
                        f"mean {lg.occurrence_mean:.4f}")
        console.print(line)
        if t.weight.special_token:  # the -10000 exclusion bias, not a head that failed to learn it
            console.print(Text(f"  – {t.token} is a special token: excluded from every vector, whatever the head "
                               "predicts", style="yellow"))
        elif lg.verdict in VERDICT_LINES:  # no line when the token does not occur in the text
            console.print(Text(*VERDICT_LINES[lg.verdict]))

    # [3] weight
    _section(console, 3, "SPLADE weight")
    console.print("SPLADE pooling: w = max over positions of log(1 + relu(logit)); special tokens zeroed")
    table = Table(box=box.SIMPLE_HEAD)
    for col in ("token", "max logit (pos)", "after ReLU", "after log(1+x)", "model encode()", "|diff|", "check"):
        table.add_column(col, justify="left" if col in ("token", "check") else "right")
    for t in targets:
        w = t.weight
        table.add_row(
            escape(t.token), Text.assemble(_logit(w.max_logit), f" ({w.max_position})"), f"{w.after_relu:.4f}",
            f"{w.after_log1p:.4f}" + (" → 0 (special)" if w.special_token else ""), f"{w.actual:.4f}",
            f"{w.abs_diff:.1e}", _yes_no(w.matches, "matches", f"MISMATCH (> {w.tolerance:g})"),
        )
    console.print(table)

    # [4] ranking
    _section(console, 4, "Ranking in the document")
    nonzero = targets[0].ranking.nonzero
    for t in targets:
        r = t.ranking
        if r.rank is None:
            console.print(Text.assemble((f"'{t.token}'", "bold"), ": weight 0, not in the document's vector ",
                                        (f"({nonzero} non-zero tokens)", "dim"), style="red"))
        else:
            style = "green" if r.rank == 1 else "yellow" if r.rank <= TOP_RANK else "red"
            console.print(Text.assemble((f"'{t.token}'", "bold"), ": rank ", (f"{r.rank}", f"bold {style}"),
                                        f" of {r.nonzero} non-zero tokens, weight {r.weight:.4f}"))
    table = Table(box=box.SIMPLE_HEAD, title="top tokens of the document vector")
    for col in ("#", "weight", "token", "kind"):
        table.add_column(col, justify="right" if col in ("#", "weight") else "left")
    for tok in targets[0].ranking.top:
        target = any(tok.token_id == t.token_id for t in targets)
        table.add_row(str(tok.rank), f"{tok.weight:.4f}", Text(tok.token, style="bold cyan" if target else ""),
                      Text("◀ diagnosed token", style="bold cyan") if target else _kind(tok))
    console.print(table)
    for t in targets:
        qe = t.query_expansion
        if qe is None:
            continue
        head = Text.assemble((f"'{t.token}'", "bold"), f" in query vectors: {len(qe.expanding)} of {qe.without_term} "
                             f"queries without the term (or this token) expand to it; {qe.with_term_active} of "
                             f"{qe.with_term} queries with either keep it")
        console.print(head)
        for e in qe.expanding[:5]:
            console.print(Text(f"    {e.weight:.4f}  [{e.qid}] {_short(e.text, 70)}", style="dim"))
        fb = qe.feedback
        if fb is not None:
            console.print(f"  with feedback (+ {fb.weight:g} x the mean of the best {fb.docs} document(s), "
                          f"{fb.terms} terms): {len(fb.expanding)} of {qe.without_term} reach it")
            for e in fb.expanding[:5]:
                console.print(Text(f"    {e.weight:.4f}  [{e.qid}] {_short(e.text, 70)}", style="dim"))

    # [5] checks and recommendations
    _section(console, 5, "Checks and recommendations")
    per_token = [c for c in d.checks if c.target is not None]
    table = Table(box=box.SIMPLE_HEAD)
    for col in ("check", "expected", "actual", "status"):
        table.add_column(col)
    for c in d.checks:
        if c.target is None:
            table.add_row(c.name, c.expected, escape(c.actual), _status(c.status))
    console.print(table)
    if per_token:  # a split term: one column per piece
        table = Table(box=box.SIMPLE_HEAD, title="per piece")
        table.add_column("check")
        table.add_column("expected")
        for t in targets:
            table.add_column(escape(t.token))
        names = list(dict.fromkeys(c.name for c in per_token))
        for name in names:
            row = {c.target: c for c in per_token if c.name == name}
            table.add_row(name, next(iter(row.values())).expected,
                          *[_status(row[t.token].status, _cell(row[t.token])) if t.token in row else Text("")
                            for t in targets])
        console.print(table)
    if not d.recommendations:
        unchecked = any(t.query_expansion is None for t in d.targets)
        gives = "weight and rank (query expansion not checked: pass --queries)" if unchecked else "weight, rank and expansion"
        console.print(Text(f"✓ nothing to fix: the model gives the term {gives}", style="bold green"))
    for i, rec in enumerate(d.recommendations, start=1):
        console.print(Text.assemble((f"{i}. ", "bold"), (rec.finding, "red"), "\n   → ", rec.action))
        for cmd in rec.commands:
            console.print(Text(f"     $ {cmd}", style="cyan"), soft_wrap=True)


# ---------------------------------------------------------------------------- explain
def _kind(t) -> Text:
    """In the text, a piece of a domain term's old split (the weight the term's former spelling
    kept), or an expansion the model adds."""
    if t.in_text:
        return Text("in text", style="dim")
    return Text(f"piece of {t.piece_of}", style="yellow") if t.piece_of else Text("expansion", style="magenta")


def render_explanation(e: QueryExplanation, console: Console) -> None:
    q = e.query
    console.print(Panel(
        Group(
            Text(q.text, style="bold"),
            Text(f"non-zero: {q.nonzero}   max weight: {q.max_weight:.4f}   sparsity: {q.sparsity:.2f}%   "
                 f"expansion tokens: {q.expansion_count}   "
                 + (f"pieces of domain terms: {q.piece_count}   " if q.piece_count else "")
                 + f"documents scored: {e.documents_scored}", style="dim"),
            Text(f"model: {e.model}", style="dim"),
        ),
        title="[bold]Query[/bold]", expand=False,
    ))
    for w in e.warnings:
        console.print(Text(f"⚠ {w}", style="yellow"))
    fb = q.feedback
    new = {a.token_id for a in fb.added if a.new} if fb else set()
    if fb:
        fed = ", ".join(fb.fed_back) or "none (no document matched the query)"
        console.print(Text(f"pseudo-relevance feedback: + {fb.weight:g} x the mean of {fed} "
                           f"(at most {fb.terms} terms kept; {len(fb.added)} tokens raised, {len(new)} of them new). "
                           "Below: the expanded query.", style="cyan"))
    table = Table(box=box.SIMPLE_HEAD, title="query tokens by weight")
    table.add_column("weight", justify="right")
    table.add_column("token")
    table.add_column("kind")
    for t in q.tokens[:SHOWN_QUERY_TOKENS]:
        kind = Text("feedback", style="cyan") if t.token_id in new else _kind(t)
        table.add_row(f"{t.weight:.4f}", escape(t.token), kind)
    if len(q.tokens) > SHOWN_QUERY_TOKENS:
        table.add_row("…", Text(f"{len(q.tokens) - SHOWN_QUERY_TOKENS} more", style="dim"), "")
    console.print(table)

    for m in e.results:
        shared = Table(box=box.SIMPLE_HEAD, title="shared tokens: contribution = q × d")
        for col in ("contribution", "token", "q", "", "d"):
            shared.add_column(col, justify="left" if col == "token" else "right")
        for s in m.shared[:SHOWN_SHARED]:
            shared.add_row(f"{s.contribution:.4f}", escape(s.token), f"{s.query_weight:.2f}", "×", f"{s.doc_weight:.2f}")
        rest = m.shared[SHOWN_SHARED:]
        if rest:
            shared.add_row(f"{sum(s.contribution for s in rest):.4f}", Text(f"{len(rest)} more", style="dim"), "", "", "")
        shared.add_row(Text(f"{m.contributions_sum:.4f}", style="bold"), Text("= Σ (score)", style="bold"), "", "", "")
        top = Table(box=box.SIMPLE_HEAD, title=f"document's top tokens ({m.nonzero} non-zero)")
        top.add_column("weight", justify="right")
        top.add_column("token")
        top.add_column("kind")
        for t in m.top_tokens:
            top.add_row(f"{t.weight:.4f}", escape(t.token), _kind(t))
        grid = Table.grid(padding=(0, 4))
        grid.add_row(shared, top)
        console.print(Panel(
            Group(Text(_short(m.text, 200), style="italic"), grid),
            title=f"[bold]#{m.rank}[/bold]  [magenta]{escape(m.doc_id)}[/magenta]  score [bold]{m.score:.4f}[/bold]",
            title_align="left",
        ))


# ---------------------------------------------------------------------------- inspect
def _fmt(x: float | None, spec: str = ".4f") -> str:
    return "–" if x is None else format(x, spec)


def render_corpus(c: CorpusStats, console: Console) -> None:
    console.print(Text.assemble(("Sparsity of ", "bold"), (c.model, "bold magenta"), f"  (vocabulary {c.vocab_size})"))
    for w in c.warnings:
        console.print(Text(f"⚠ {w}", style="yellow"))
    table = Table(box=box.SIMPLE_HEAD, title="non-zero tokens per text")
    for col in ("texts", "count", "mean", "median", "min", "max", "mean sparsity"):
        table.add_column(col, justify="left" if col == "texts" else "right")
    for name, s in (("documents", c.documents), ("queries", c.queries)):
        if s is None:
            table.add_row(name, Text("not given", style="dim"), "", "", "", "", "")
            continue
        n = s.nonzero
        table.add_row(name, str(s.count), f"{n.mean:.1f}", f"{n.median:.1f}", str(n.min), str(n.max),
                      f"{s.sparsity_mean:.2f}%")
    console.print(table)
    if c.flops is not None:
        f = c.flops
        console.print(Text.assemble(("Estimated FLOPS ", "bold"), (f"{f.value:.2f}", "bold"),
                                    f" per query-document pair ({f.value_excluding_domain:.2f} without domain tokens)"))
        console.print(Text(f"  FLOPS = {f.definition}", style="dim"))
        console.print(Text(f"  FLOPS regulariser (non-domain, mean weights): {f.regularizer:.4f}", style="dim"))
    if c.feedback is not None:
        fb = c.feedback
        console.print(Text.assemble(
            ("With feedback ", "bold"), f"(+ {fb.weight:g} x the mean of the best {fb.docs} document(s), "
            f"{fb.terms} terms): queries have {fb.queries.nonzero.mean:.1f} non-zero tokens on average, FLOPS ",
            (f"{fb.flops:.2f}", "bold"), f" ({fb.flops / c.flops.value:.1f}x)" if c.flops.value > 0 else ""))
    dom = c.domain
    console.print()
    console.print(Text.assemble(("Domain tokens ", "bold"), f"{dom.count} (from {dom.source}): mean weight ",
                                ("where they occur ", ""), (_fmt(dom.mean_weight_occurring), "bold green"),
                                ", where they don't ", (_fmt(dom.mean_weight_not_occurring), "bold")))
    if dom.tokens:
        table = Table(box=box.SIMPLE_HEAD)
        for col in ("token", "id", "docs with", "mean w (with)", "docs without", "mean w (without)", "activated without"):
            table.add_column(col, justify="left" if col == "token" else "right")
        for t in dom.tokens:
            w_in = t.mean_weight_occurring
            style = "dim" if w_in is None else "green" if w_in > 0 else "red"
            table.add_row(escape(t.token), str(t.token_id), str(t.docs_occurring), Text(_fmt(w_in), style=style),
                          str(t.docs_not_occurring), _fmt(t.mean_weight_not_occurring),
                          str(t.activated_without_occurrence))
        console.print(table)

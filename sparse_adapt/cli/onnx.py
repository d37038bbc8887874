"""``sparse-adapt onnx``: the SPLADE encoder, pooling included, as one ONNX graph."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from sparse_adapt.cli.output import BASE_HELP, OVERWRITE_HELP, wrote


def onnx(
    model: str = typer.Option(..., "--model", help=BASE_HELP),
    out: Path = typer.Option(..., "--out", help="Output directory: model.onnx + tokenizer (written atomically)."),
    opset: int = typer.Option(18, "--opset", help="ONNX opset (>= 18, torch's ONNX exporter)."),
    overwrite: bool = typer.Option(False, "--overwrite", help=OVERWRITE_HELP),
) -> None:
    """Export input_ids/attention_mask -> pooled (batch, vocab) SPLADE weights, checked in ONNX Runtime."""
    from sparse_adapt.destination import check_output
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.modeling.hub import model_reference
    from sparse_adapt.modeling.onnx import ONNX_FILE, TOP_K, export_onnx

    check_output(out, overwrite, inputs=(model,))
    # On CPU whatever --device says: the graph is traced for ONNX Runtime's CPU provider and
    # verified against PyTorch there, so both sides see the same fp32 arithmetic.
    splade = SpladeEncoder.from_pretrained(model, device="cpu")
    # torch's exporter logs a warning per torchvision operator it cannot register.
    exporter_log = logging.getLogger("torch.onnx")
    level = exporter_log.level
    exporter_log.setLevel(logging.ERROR)
    try:
        meta = export_onnx(splade, out, opset, source=model_reference(model))
    finally:
        exporter_log.setLevel(level)
    size = sum(p.stat().st_size for p in out.glob(f"{ONNX_FILE}*")) / 2**20
    wrote(out / ONNX_FILE, f" ({size:.1f} MB, opset {meta.opset}, {meta.seconds:.1f} s); "
                           f"ONNX Runtime vs PyTorch on {meta.probes} texts: max |diff| {meta.max_abs_diff:.1e}, "
                           f"top-{TOP_K} identical {meta.top10_identical}/{meta.probes}")


def register(app: typer.Typer) -> None:
    app.command("onnx")(onnx)

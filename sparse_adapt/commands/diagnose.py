"""CLI commands for diagnose (filled in by its issue)."""

import typer


def register(app: typer.Typer) -> None:
    pass

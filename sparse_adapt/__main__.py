"""``python -m sparse_adapt`` runs the CLI (also under ``accelerate launch -m sparse_adapt``);
:func:`entry` is the ``sparse-adapt`` console script too."""

import sys


def entry() -> None:
    # The CLI installs its own stop handlers only once imported (typer, rich, the commands:
    # ~0.15 s); a Ctrl-C in that window was a traceback. Nothing has been written by then.
    try:
        from sparse_adapt.cli import entry as run
    except KeyboardInterrupt:
        sys.stderr.write("stopped by Ctrl-C before the command began: nothing was written\n")
        sys.exit(130)
    run()


if __name__ == "__main__":
    entry()

"""``python -m sparse_adapt`` runs the CLI (also under ``accelerate launch -m sparse_adapt``)."""

from sparse_adapt.cli import entry

if __name__ == "__main__":
    entry()

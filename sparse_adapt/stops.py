"""The signals that stop a run, and which of them a process takes over.

Kept free of heavy imports: the console script takes them over before the CLI (typer, rich, the
commands) has loaded (:mod:`sparse_adapt.__main__`); the CLI's own handlers are in
:func:`sparse_adapt.cli._stop_handlers`.
"""

from __future__ import annotations

import os
import signal
import threading

# Signals that stop a run: Ctrl-C, `kill`/`docker stop` (SIGTERM), a closed terminal (SIGHUP).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def takeable() -> list[int]:
    """The stop signals this process may handle in Python now.

    None outside the main thread (Python allows none there) or under a multi-process launcher: a
    rank blocked in a collective runs a Python handler only when the C call returns, so the
    launcher's SIGTERM waited for its SIGKILL (WORLD_SIZE is the launchers' word for it, torchrun's
    and accelerate's, set before any process group exists). A signal set to be ignored stays so
    (`nohup` ignores SIGHUP, a shell's `cmd &` SIGINT), and a handler installed from C (None) is no
    Python callable to put back.
    """
    world = os.environ.get("WORLD_SIZE", "")
    if threading.current_thread() is not threading.main_thread() or (world.isdigit() and int(world) > 1):
        return []
    return [signum for signum in STOP_SIGNALS if signal.getsignal(signum) not in (signal.SIG_IGN, None)]


def stop_name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name

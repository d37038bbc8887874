"""``python -m sparse_adapt`` runs the CLI (also under ``accelerate launch -m sparse_adapt``);
:func:`entry` is the ``sparse-adapt`` console script too."""

import os
import signal
import sys


def entry() -> None:
    """The CLI, with the stop signals taken over for the whole process, not only while a command
    runs (``cli.main`` holds its own handlers then, and puts back the ones it found):

    - before the CLI has loaded (typer, rich, the commands: ~0.15 s) a Ctrl-C was a traceback and
      a SIGTERM ended the process without a word; nothing has been written by then;
    - after the command returned, the ~50 ms of teardown (finalizers, atexit) a stop ended without
      a word, killed by the signal, or with "Exception ignored in atexit callback" and a traceback.
      The command's outputs are complete then: the process ends at once with the command's code.
    """
    from sparse_adapt.stops import stop_name, takeable

    noted: list[int] = []
    finished: list[int] = []  # the command's exit code, once it returned

    def stop(signum, frame):
        if finished:
            for stream in (sys.stdout, sys.stderr):  # what the command printed still reaches a pipe
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(finished[0])
        noted.append(signum)
        raise KeyboardInterrupt

    for signum in takeable():
        signal.signal(signum, stop)
    try:
        from sparse_adapt.cli import main

        main(finished=finished)  # the code is in ``finished`` before main() puts ``stop`` back
    except KeyboardInterrupt:  # before main() took the signals over (in it, a stop is its own line)
        if not noted and not takeable():
            raise  # no handlers of ours or main()'s (a multi-process launcher's rank): not ours to word
        signum = noted[0] if noted else signal.SIGINT
        sys.stderr.write(f"stopped by {stop_name(signum)} before the command began: nothing was written\n")
        sys.exit(128 + signum)
    sys.exit(finished[0])


if __name__ == "__main__":
    entry()

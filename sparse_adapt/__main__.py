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
    - after the command returned, in the teardown (finalizers, atexit) a stop ended the process
      without a word, or with "Exception ignored in atexit callback" and a traceback. The
      command's outputs are complete then: the process ends at once with the command's code. In
      the last tens of milliseconds Python has put the default handlers back itself (freeing the
      modules): a stop there still ends the process by the signal, without a line.
    """
    from sparse_adapt.stops import stop_name, takeable

    noted: list[int] = []
    finished: list[int] = []  # the command's exit code, once it returned

    def stop(signum, frame):
        if finished:
            for stream in (sys.stdout, sys.stderr):  # what the command printed still reaches a pipe
                try:
                    stream.flush()
                except Exception:  # noqa: BLE001 - a closed or broken stream: nothing more to save
                    pass
            os._exit(finished[0])
        noted.append(signum)
        if len(noted) == 1:  # a second stop while the first one's line is written: that line stands
            raise KeyboardInterrupt

    def stopped_before() -> None:
        signum = noted[0] if noted else signal.SIGINT
        sys.stderr.write(f"stopped by {stop_name(signum)} before the command began: nothing was written\n")
        sys.exit(128 + signum)

    try:
        for signum in takeable():
            signal.signal(signum, stop)
        from sparse_adapt.cli import main
    except KeyboardInterrupt:
        stopped_before()
    try:
        main(finished=finished)  # the code is in ``finished`` before main() puts ``stop`` back
    except KeyboardInterrupt:
        if not noted:  # main()'s handlers word a stop while it runs; without any (a rank under a launcher) it is raw
            raise
        stopped_before()  # ours, before main() took the signals over
    sys.exit(finished[0])


if __name__ == "__main__":
    entry()

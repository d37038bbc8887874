"""Benchmarks and diagnostics, each run as ``python -m bench.<module>`` (bench/README.md says what
each measures), e.g. ``python -m bench.encode`` (encoding speed and memory against peers) and
``python -m bench.train_step`` (distillation step cost). Not part of the test suite's time."""

"""The bot process: settings, services, the Discord client, the scheduler, the console."""

import os

# numpy's BLAS starts a thread per core for the one matrix-vector product a turn's semantic
# memory retrieval does; on a busy host those threads contend, and one thread measured three to
# four times faster (tests/benchmarks/bench_retrieval.py). Set before numpy is first imported;
# an operator's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

"""Differential fuzzing of the compiler: random RASP programs, compiled and checked against the
RASP evaluator (non-causal and causal). Exits non-zero on any MISMATCH or CRASH.

Run: `python benchmarks/fuzz.py -n 10000 --jobs 2` or `python -m benchmarks.fuzz ...`;
`--help` lists the options. The work is done by `compiler.fuzzing.driver`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.fuzzing.driver import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

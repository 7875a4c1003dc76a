"""Differential fuzzing of the compiler: random RASP programs, compiled and checked against the
RASP evaluator (non-causal and causal). Exits non-zero on any MISMATCH or CRASH.

Run: `python benchmarks/fuzz.py -n 10000 --jobs 2` or `python -m benchmarks.fuzz ...`;
`--help` lists the options. `--results FILE` saves every program's outcome (atomically, every
50 programs) and resumes a killed run; `--redo TEXT` re-checks the stored programs whose
outcome mentions TEXT. The work is done by `compiler.fuzzing.driver`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.fuzzing.driver import main

if __name__ == "__main__":
    sys.exit(main())

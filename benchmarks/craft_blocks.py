"""Build time and weight size of the chamber blocks for growing value-set sizes.

Run: `python benchmarks/craft_blocks.py [--sizes 10 100 1000] [--repeats 5]`. Prints one row per
(block, size): the median build time over the repeats and the number of weight entries
(dense float64 matrices; MB = entries * 8 / 1e6). SequenceMap is skipped where its dense first
layer (n1 + n2 + 1) x (n1 * n2) would not fit in memory.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from craft.bases import BasisDirection, VectorSpaceWithBasis
from craft.blocks import MLP, AttentionHead
from craft.chamber.categorical_attn import attention_head, categorical_value_map, selector_qk
from craft.chamber.categorical_mlp import map_categorical_mlp, sequence_map_categorical_mlp
from craft.chamber.numerical_mlp import map_numerical_mlp
from craft.chamber.selector_width import selector_width
from rasp import Comparison

ONE = VectorSpaceWithBasis((BasisDirection("one"),))
BOS = VectorSpaceWithBasis((BasisDirection("tokens", "BOS"),))
SEQMAP_MAX_ENTRIES = 5e8


def _entries(block) -> int:
    if isinstance(block, tuple):
        return sum(_entries(b) for b in block)
    if isinstance(block, MLP):
        return block.first.matrix.size + block.second.matrix.size
    if isinstance(block, AttentionHead):
        return block.w_qk.matrix.size + block.w_ov.matrix.size
    return block.matrix.size  # BilinearMap / LinearMap


def _cases(n: int) -> dict[str, Callable[[], object] | None]:
    cat_in = VectorSpaceWithBasis.from_values("x", range(n))
    cat_out = VectorSpaceWithBasis.from_values("y", range(n))
    words = VectorSpaceWithBasis.from_values("w", [f"w{i}" for i in range(n)])
    num_in = VectorSpaceWithBasis((BasisDirection("x"),))
    num_out = VectorSpaceWithBasis((BasisDirection("y"),))
    width_out = VectorSpaceWithBasis.from_values("sw", range(n + 1))
    cases: dict[str, Callable[[], object] | None] = {
        "Map categorical (n -> n values)": lambda: map_categorical_mlp(cat_in, cat_out, lambda v: (7 * v + 3) % n),
        "Map numerical (n input values)": lambda: map_numerical_mlp(
            lambda v: v * v - 3, num_in, num_out, range(n), ONE, BOS
        ),
        "Select numeric LT (Comparison)": lambda: selector_qk(cat_in, cat_out, Comparison.LT),
        "Select str EQ (Comparison)": lambda: selector_qk(words, words, Comparison.EQ),
        "Select lambda (per-pair call)": lambda: selector_qk(cat_in, cat_out, lambda k, q: (k + q) % 3 == 0),
        "Attention head + BOS (n x n)": lambda: attention_head(
            selector_qk(cat_in, cat_out, Comparison.LEQ), 1, categorical_value_map(cat_in, cat_out), BOS, ONE
        ),
        "SelectorWidth (max_seq_len n)": lambda: selector_width(
            selector_qk(cat_in, cat_out, Comparison.LEQ), 1, width_out, n, BOS, ONE, True
        ),
    }
    if (2 * n + 1) * n * n <= SEQMAP_MAX_ENTRIES:
        s1 = VectorSpaceWithBasis.from_values("a", range(n))
        s2 = VectorSpaceWithBasis.from_values("b", range(n))
        cases["SequenceMap (n x n pairs)"] = lambda: sequence_map_categorical_mlp(
            s1, s2, cat_out, lambda a, b: (a + b) % n, ONE, "h"
        )
    else:
        cases["SequenceMap (n x n pairs)"] = None
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'block':34s} {'n':>6s} {'median build s':>15s} {'weight entries':>15s} {'MB (f64)':>9s}")
    for n in args.sizes:
        for name, build in _cases(n).items():
            if build is None:
                print(f"{name:34s} {n:6d} {'skipped':>15s} {(2 * n + 1) * n * n:15d} {'(too big)':>9s}")
                continue
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                block = build()
                times.append(time.perf_counter() - start)
            entries = _entries(block)
            print(f"{name:34s} {n:6d} {statistics.median(times):15.4f} {entries:15d} {entries * 8 / 1e6:9.2f}")


if __name__ == "__main__":
    main()

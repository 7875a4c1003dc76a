"""Reproduce the attention-capacity toy experiment at a 2-core size and print it beside the paper.

Trains small attention-only layers on random databases (``constructions.facts.capacity_training``)
and prints, per pair, the database's slice bound (Proposition 2.1), the layer's capacity
``d_model + n_heads * d_vo`` (inequality 9), and recall accuracy under argmax and softmax >= tau.
Run: ``python -m constructions.experiments.attention_capacity [--steps 2000] [--seeds 1]``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from constructions.facts.capacity_training import CapacityResult, LayerShape, TrainConfig, train_on_database
from constructions.facts.database import random_database
from constructions.facts.metrics import TAUS

# (n_subjects, n_predicates, n_objects, rho) -> layers trained on it.
GRID: tuple[tuple[tuple[int, int, int, float], tuple[tuple[int, int, int, int], ...]], ...] = (
    ((8, 3, 6, 0.8), ((2, 1, 1, 1), (3, 1, 2, 2))),
    ((12, 4, 8, 0.7), ((3, 1, 2, 2), (6, 4, 3, 3))),
    ((20, 5, 10, 0.6), ((2, 1, 1, 1), (4, 2, 2, 2), (6, 4, 6, 6))),
    ((30, 6, 12, 0.6), ((4, 2, 2, 2), (6, 4, 3, 3), (6, 4, 6, 6))),
    ((40, 8, 16, 0.6), ((4, 2, 3, 3), (6, 4, 6, 6))),
)
# Fixed d_qk + d_vo = 4 at d_model = 4, two heads: moving width from QK to OV.
SHIFT_DB = (30, 6, 12, 0.6)
SHIFT_LAYERS = ((4, 2, 3, 1), (4, 2, 2, 2), (4, 2, 1, 3))

PAPER_HEADLINES = (
    ("facts / Prop. 2.1 bound", "about 1.8"),
    ("argmax", "layers with bound <= 10 memorise databases with bound up to ~80"),
    ("tau = 0.5", "behaves like argmax"),
    ("tau = 0.75", "memorised database bound about 3-4 x layer bound"),
    ("tau = 0.95", "memorised database bound about 1-2 x layer bound"),
    ("tau = 0.99", "fails even below the layer bound"),
    ("d_qk -> d_vo at fixed sum", "more d_vo raises accuracy (until d_vo is large)"),
)


@dataclass(frozen=True)
class Row:
    """One printed line: database and layer settings and the training result."""

    db: tuple[int, int, int, float]
    layer: tuple[int, int, int, int]
    seed: int
    result: CapacityResult


def run_pair(db_cfg: tuple[int, int, int, float], layer: tuple[int, int, int, int], seed: int,
             steps: int) -> Row:
    """Train one (database, layer) pair; the database and the init share ``seed``."""
    db = random_database(*db_cfg, seed=seed)
    result = train_on_database(db, LayerShape(*layer), TrainConfig(steps=steps, seed=seed))
    return Row(db_cfg, layer, seed, result)


def format_row(row: Row) -> str:
    r = row.result
    accs = " ".join(f"{r.scores.at(t):5.2f}" for t in TAUS)
    return (f"{str(row.db):18s} {r.n_facts:4d} {r.db_bound:5d}  {str(row.layer):13s} "
            f"{r.layer_bound:5d}  {r.scores.argmax:6.2f} {accs}   {r.final_loss:6.3f}  "
            f"{r.prop_3_1_error:8.1e}")


HEADER = ("db (nk,nq,nv,rho)  |D| bound  layer (d,H,qk,vo) bound  argmax  t.50  t.75  t.95  t.99"
          "   loss  rel|L-Z|")


def max_memorised_ratio(rows: list[Row], tau: float | None) -> float:
    """Largest db_bound / layer_bound among pairs with accuracy 1 (argmax when tau is None)."""
    ratios = [row.result.db_bound / row.result.layer_bound for row in rows
              if (row.result.scores.argmax if tau is None else row.result.scores.at(tau)) == 1.0]
    return max(ratios, default=0.0)


def summary(rows: list[Row]) -> list[tuple[str, str]]:
    """Our counterpart of each paper headline, in the same order."""
    facts_ratio = [row.result.n_facts / row.result.db_bound for row in rows]
    shift = sorted((row for row in rows if row.db == SHIFT_DB and row.layer in SHIFT_LAYERS),
                   key=lambda row: (row.seed, row.layer[3]))
    shift_text = ", ".join(f"qk={row.layer[2]} vo={row.layer[3]}: {row.result.scores.argmax:.2f}"
                           for row in shift)
    ours = [f"{min(facts_ratio):.2f}-{max(facts_ratio):.2f}"]
    for tau in (None, 0.5, 0.75, 0.95, 0.99):
        label = "argmax" if tau is None else f"tau {tau}"
        ours.append(f"{label}: largest memorised db/layer bound ratio "
                    f"{max_memorised_ratio(rows, tau):.1f}")
    ours.append(f"argmax accuracy {shift_text}")
    return [(paper, mine) for (_, paper), mine in zip(PAPER_HEADLINES, ours)]


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0..n-1 per pair")
    args = parser.parse_args(argv)
    start = time.time()
    pairs = [(db, layer) for db, layers in GRID for layer in layers]
    pairs += [(SHIFT_DB, layer) for layer in SHIFT_LAYERS if (SHIFT_DB, layer) not in pairs]
    print(HEADER)
    rows = []
    for seed in range(args.seeds):
        for db_cfg, layer in pairs:
            row = run_pair(db_cfg, layer, seed, args.steps)
            rows.append(row)
            print(format_row(row), flush=True)
    print()
    print(f"{'headline':28s} | {'paper':62s} | ours")
    for (name, _), (paper, mine) in zip(PAPER_HEADLINES, summary(rows)):
        print(f"{name:28s} | {paper:62s} | {mine}")
    print(f"\n{len(rows)} pairs, {args.steps} Adam steps each, {time.time() - start:.0f} s")
    return rows


if __name__ == "__main__":
    main()

"""Measure the superposition constructions against published reference figures.

Usage: ``python benchmarks/superposition.py [--seeds N] [--quick]``. Each table prints our
measurement next to a reference value (column "ref": the figure measured on the reference
prototypes of the construction papers, as summarised in docs/superposition.md); everything else
is computed here. numpy streams differ from those prototypes, so agreement is statistical, not
digit-for-digit.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from constructions.superposition.boolean_circuit import build_two_layer_circuit, measure_circuit
from constructions.superposition.features import random_unit_features
from constructions.superposition.measure_sfb import measure_bigrams
from constructions.superposition.measure_uand import exhaustive_inputs, measure_superposed, measure_uand, random_inputs
from constructions.superposition.sfb import build_sfb_random_projection, random_bigrams
from constructions.superposition.targeted import build_targeted_uand, gate_inputs, measure_targeted, random_pair_gates
from constructions.superposition.uand import build_uand


def table(title: str, header: list[str], rows: list[list]) -> None:
    """Print a fixed-width table."""
    cells = [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    print(f"\n## {title}")
    print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for row in cells:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))


# (d, p, ell): max one (mean over seeds), mean one, max none, min acc
UAND_REFERENCE = {
    (1024, 0.15, 2): (0.610, 0.152, 0.400, 0.99999), (1024, 0.15, 3): (1.061, 0.304, 0.636, 0.9965),
    (2048, 0.15, 2): (0.455, 0.151, 0.216, 1.0), (2048, 0.15, 3): (0.745, 0.302, 0.380, 0.9994),
    (2048, 0.10, 2): (0.555, 0.100, 0.321, 1.0), (4096, 0.10, 2): (0.372, 0.100, 0.182, 1.0),
    (4096, 0.10, 3): (0.597, 0.200, 0.302, 0.99999), (4096, 0.15, 3): (0.591, 0.300, 0.260, 0.99997),
}


def uand_basic(seeds: int, quick: bool) -> None:
    rows = []
    for (d, p, ell), ref in UAND_REFERENCE.items():
        if quick and d == 4096:
            continue
        runs = []
        for seed in range(seeds):
            layer = build_uand(64, d, p, seed)
            inputs = exhaustive_inputs(64, 2) if ell == 2 else random_inputs(64, 3, 5000, seed + 100)
            rep = measure_uand(layer, inputs)
            runs.append((layer.meta.min_intersection, rep["one"].max_abs, rep["one"].mean_abs,
                         rep["none"].max_abs, rep.overall.accuracy))
        r = np.array(runs)
        rows.append([d, p, ell, int(r[:, 0].min()), r[:, 1].mean(), ref[0], r[:, 2].mean(), ref[1],
                     r[:, 3].mean(), ref[2], f"{r[:, 4].min():.5f}", ref[3]])
    table("U-AND basic, d0=64: error vs d and p",
          ["d", "p", "ell", "min|S|", "max one", "ref", "mean one", "ref", "max none", "ref",
           "min acc", "ref"], rows)


SUPERPOSED_REFERENCE = {  # (d0, d, p, m): mean one, acc
    (256, 2048, 0.10, 128): (0.211, 0.993), (256, 2048, 0.10, 256): (0.246, 0.983),
    (256, 2048, 0.10, 512): (0.306, 0.949), (256, 2048, 0.10, 1024): (0.404, 0.857),
    (256, 2048, 0.10, 2048): (0.586, 0.679), (128, 2048, 0.10, 512): (0.415, 0.846),
    (256, 2048, 0.05, 2048): (0.398, 0.831), (256, 8192, 0.05, 1024): (0.285, 0.969),
}


def _superposed(d0: int, d: int, p: float, m: int, seed: int):
    feats = random_unit_features("res", m, d0, seed)
    layer = build_uand(feats, d, p, seed + 1, gates=np.array([[0, 1]]), active=2)
    return layer, measure_superposed(layer, 300, 50, 2, seed + 2, empty="skip")


def uand_superposed(quick: bool) -> None:
    rows = []
    for (d0, d, p, m), ref in SUPERPOSED_REFERENCE.items():
        if quick and d == 8192:
            continue
        layer, rep = _superposed(d0, d, p, m, 0)
        skipped = 300 * 101 - rep.overall.count
        rows.append([d0, d, p, m, layer.meta.predicted_sigma, rep["one"].mean_abs, ref[0],
                     rep.overall.accuracy, ref[1], skipped])
    table("U-AND with superposed inputs, s=2",
          ["d0", "d", "p", "m", "sigma", "mean one", "ref", "acc", "ref", "empty pairs"], rows)
    rows = []
    for d0, ref in ((128, 512), (256, 1024)):
        first = next((m for m in (64, 128, 256, 512, 1024, 2048, 4096)
                      if _superposed(d0, 2048, 0.10, m, 0)[1].overall.accuracy < 0.9), None)
        rows.append([d0, first, ref])
    table("Misfire point (first m with acc@0.5 < 0.9), d=2048, p=0.1", ["d0", "m*", "ref"], rows)


TARGETED_REFERENCE = {  # (d0, d, |E|): mean one, mean none, acc (reference acc protocol; ours: all readings)
    (256, 1024, 256): (0.091, 0.008, 1.0), (256, 1024, 2048): (0.217, 0.020, 0.9993),
    (256, 1024, 4096): (0.314, 0.052, 0.9927), (256, 1024, 8192): (0.445, 0.133, 0.9488),
    (256, 1024, 16384): (0.651, 0.296, 0.7506), (256, 2048, 4096): (0.217, 0.016, 0.9986),
    (256, 2048, 16384): (0.449, 0.128, 0.9285), (256, 2048, 32768): (0.641, 0.287, 0.7200),
    (128, 1024, 4096): (0.408, 0.106, 0.9764), (128, 1024, 8192): (0.578, 0.233, 0.8524),
}


def targeted(quick: bool) -> None:
    rows = []
    feats = {d0: random_unit_features("res", 2048, d0, 0) for d0 in (128, 256)}
    for (d0, d, n_gates), ref in TARGETED_REFERENCE.items():
        if quick and n_gates > 16384:
            continue
        layer = build_targeted_uand(feats[d0], random_pair_gates(2048, n_gates, 1), d, 8, 2)
        rep = measure_targeted(layer, gate_inputs(layer, 400, 2, 3)[0])
        rows.append([d0, d, n_gates, layer.meta.predicted_sigma, rep["one"].mean_abs, ref[0],
                     rep["none"].mean_abs, ref[1], f"{rep.overall.accuracy:.4f}", ref[2]])
    table("Targeted superposed AND, m=2048, t=8, s=2: gate capacity",
          ["d0", "d", "|E|", "sigma", "mean one", "ref", "mean none", "ref", "acc", "ref"], rows)


SFB_REFERENCE = {  # (d_res, d_qk, m, ratio): rms absent, balanced acc (mean)
    (256, 64, 4096, 1 / 16): (0.291, 0.945), (256, 64, 4096, 1 / 4): (0.574, 0.804),
    (256, 64, 4096, 1.0): (1.151, 0.661), (256, 64, 4096, 4.0): (2.273, 0.578),
    (512, 32, 4096, 1 / 16): (0.278, 0.938), (512, 32, 4096, 1 / 4): (0.542, 0.807),
    (512, 32, 4096, 1.0): (1.100, 0.663),
    (128, 16, 2048, 1 / 16): (0.278, 0.903), (128, 16, 2048, 1 / 4): (0.562, 0.795),
    (128, 16, 2048, 1.0): (1.062, 0.670), (128, 16, 2048, 4.0): (2.195, 0.597),
}


def sfb(seeds: int, quick: bool) -> None:
    rows = []
    for (d_res, d_qk, m, ratio), ref in SFB_REFERENCE.items():
        if quick and d_res != 128:
            continue
        feats = random_unit_features("res", m, d_res, 0, dtype=np.float64)
        rms, acc = [], []
        for seed in range(seeds):
            head = build_sfb_random_projection(
                feats, random_bigrams(m, int(ratio * d_res * d_qk), seed + 1), d_qk, seed + 2)
            rep = measure_bigrams(head, 2000, seed + 3)
            rms.append(rep.classes["absent"].rms)
            acc.append(rep.balanced_accuracy)
        rows.append([d_res, d_qk, m, f"{ratio:g}", head.meta.predicted_rms_absent, float(np.mean(rms)),
                     ref[0], float(np.mean(acc)), ref[1]])
    table("SFB random projection: accuracy vs |B|/(d_res d_qk)",
          ["d_res", "d_qk", "m", "ratio", "law 1.1sqrt", "rms absent", "ref", "bal acc", "ref"], rows)


CIRCUIT_REFERENCE = {  # label: L1 on mean, L2 on mean, L2 on acc
    "basis-aligned": (0.035, 0.22, 0.93), "superposed": (0.145, 0.315, 0.81),
}


def circuit(seeds: int) -> None:
    rows = []
    for label, superposed in (("basis-aligned", False), ("superposed", True)):
        for seed in range(seeds):
            c = build_two_layer_circuit(512, 1024, 256, 1024, 1024, 8, seed, superposed=superposed)
            rep = measure_circuit(c, 400, seed + 10)
            ref = CIRCUIT_REFERENCE[label]
            rows.append([label, seed, rep.layer1["both"].mean_abs, ref[0], rep.layer2_on.mean_abs,
                         ref[1], rep.layer2_on.accuracy, ref[2], rep.growth,
                         f"{rep.layer2_others.accuracy:.5f}"])
    table("Two stacked layers, d_res=512, |E1|=1024, |E2|=256: error growth",
          ["inputs", "seed", "L1 on", "ref", "L2 on", "ref", "L2 acc", "ref", "growth", "L2 neg acc"],
          rows)


def build_time() -> None:
    start = time.perf_counter()
    layer = build_uand(1024, 8192, 0.05, 0)
    elapsed = time.perf_counter() - start
    table("Build time (requirement < 2 s)", ["d0", "d", "p", "gates", "min|S|", "seconds"],
          [[1024, 8192, 0.05, layer.meta.n_gates, layer.meta.min_intersection, elapsed]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="skip the largest configurations")
    args = parser.parse_args()
    start = time.perf_counter()
    build_time()
    uand_basic(args.seeds, args.quick)
    uand_superposed(args.quick)
    targeted(args.quick)
    sfb(args.seeds, args.quick)
    circuit(args.seeds)
    print(f"\ntotal {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()

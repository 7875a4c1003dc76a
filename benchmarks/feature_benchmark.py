"""Computed features in superposition: the staged models and SAE baselines, as tables.

Per stage (1k, 4k, 16k features, or the copy stage 1k-copy): features at the last residual site,
width d, the interference bound's verdict, decoded-output accuracy against RASP on sampled inputs
(Zipf tokens), L0 per residual site, the feature-frequency profile, the co-firing classes (how many,
their L0, distinct code sets), and the time to generate activations with true codes (measured on
``--timing-tokens`` after a warm-up batch, extrapolated to 10^7 and labelled so).

With SAELens installed (the ``sae`` extra, in its own venv) it then trains SAELens SAEs on the
last residual site of ``--sae-stage`` (latents = true directions, k = the true L0): the first of
``--archs`` at every compression width d of ``--widths`` (the superposition dial), the others at
the packed width, and the first again at the other ``--ks``. Each trains on a pool of activations
and is scored on held-out ones with SynthSAEBench's metrics plus spliced-output accuracy and
causal use, and against the co-firing class dictionary (``mcc_vs_classes``); its loss curve is
recorded. The learning rate warms up over ``--warmup`` steps and decays linearly to 0 over the
last ``--decay`` share of the steps (SAELens' schedule). After every SAE the rows (with curves),
the recovery plot and the loss plot are rewritten under ``--out``; ``--cache`` keeps the activation
shards for later runs, ``--merge`` plots the rows of several runs together, and ``--true-topk``
measures the true dictionary cut to k latents per activation. Without
SAELens it says so and stops after the stage table.

    python benchmarks/feature_benchmark.py                        # 1k, 4k, 16k; SAEs if installed
    python benchmarks/feature_benchmark.py --stages 1k --sae-steps 300 --widths packed,144
    python benchmarks/feature_benchmark.py --stages "" --sae-stage 4k --archs topk --ks 38  # SAEs only
    python benchmarks/feature_benchmark.py --stages 1k-copy --sae-stage 1k-copy --widths packed --ks 7
    python benchmarks/feature_benchmark.py --stages "" --sae-stage 1k-copy --true-topk 4,7,14 --cache acts/
    python benchmarks/feature_benchmark.py --sae-stage 1k-copy --merge a/saes_1k-copy.json,b/saes_1k-copy.json

``--seeds 0,1,2`` trains every SAE once per seed (its spread over seeds); ``--json PATH`` also
saves the SAE table with its command and machine (benchmarks/results.py), ``--stages-json PATH``
the stage table.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results import Table, add_json_argument, publish
from compiler.atomic import atomic_write_text
from compiler.lab.features import (
    STAGES,
    CopySpec,
    ShardReader,
    Site,
    SiteRunner,
    Stage,
    TopKOf,
    accuracy_of,
    build_stage,
    causal_use,
    cofiring,
    data_profile,
    dense_codes,
    dictionary_mcc,
    ground_truth,
    loss_plot,
    perfect_coder,
    rasp_references,
    recovery_plot,
    residual_sites,
    sample_ids,
    spliced_accuracy,
    stream_activations,
    synthetic_scores,
    true_dictionary,
)
from compression.analytic import interference_bound, packed_projection

ZIPF = 1.0
# When chance co-firing of rare features is all that merges true directions into classes (the copy
# stages: 14,966 classes for 15,235 directions at 16k), the class dictionary is the true one up to
# those, and the second Hungarian matching of all latents (minutes at 16k) is skipped:
# mcc_vs_classes is then None.
CLASS_SHARE = 0.95


def exactness(stage: Stage, samples: int, w: np.ndarray) -> float:
    ids = sample_ids(stage.compiled, samples, seed=1, zipf=ZIPF)
    refs = rasp_references(stage.compiled, stage.programs, ids, progress=True)
    return accuracy_of(stage.compiled, refs, SiteRunner(stage.compiled, w).output).sequence


def l0_per_site(stage: Stage) -> list[float]:
    ids = sample_ids(stage.compiled, 500, seed=2, zipf=ZIPF)
    capture = SiteRunner(stage.compiled).capture(ids)
    mask = ids != stage.compiled.config.pad_id
    mask[:, 0] = False
    out = []
    for site in residual_sites(stage.compiled):
        dictionary = true_dictionary(stage.compiled, site, stage.projection)
        codes = dictionary.codes(capture.values(site))[mask]
        out.append(float(np.mean(np.sum(codes != 0, axis=1))))
    return out


def stage_row(name: str, samples: int, timing_tokens: int, folder: Path) -> tuple[dict, Stage]:
    stage = build_stage(STAGES[name])
    model = stage.compiled
    last = Site("resid", len(model.config.layers))
    dictionary = true_dictionary(model, last, stage.projection)
    accuracy = exactness(stage, samples, stage.projection)
    stream_activations(model, last, folder, 4096, stage.projection, progress=False, write=False)
    timing = stream_activations(model, last, folder, timing_tokens, stage.projection, progress=False, write=False,
                                seed=7)
    profile_dir = folder / f"profile_{name}"
    stream_activations(model, last, profile_dir, 100_000, stage.projection, zipf=ZIPF, progress=False)
    occurring, dense_range = data_profile(ShardReader(profile_dir).batches(8192, ("code_index", "dense_codes")),
                                          dictionary.num_features)
    classes = cofiring(codes for _, codes in coded_batches(ShardReader(profile_dir), dictionary,
                                                           ground_truth(dictionary, occurring, dense_range)))
    counts = np.zeros(dictionary.num_features)
    tokens = 0
    for batch in ShardReader(profile_dir).batches(8192, ("code_index",)):
        index = batch["code_index"]
        np.add.at(counts, index[index >= 0], 1)
        tokens += len(index)
    freq = counts / tokens
    row = {
        "stage": name, "features": dictionary.num_features, "dense": len(dictionary.dense_labels),
        "dropped": len(dictionary.dropped), "D": model.config.residual_width, "d": stage.d,
        "features_per_dim": dictionary.num_features / stage.d, "bound_exact": stage.claims_exact,
        "max_load": stage.max_load, "samples": samples, "accuracy": accuracy, "l0_per_site": l0_per_site(stage),
        "freq_min": float(freq.min()), "freq_median": float(np.median(freq)), "freq_max": float(freq.max()),
        "never_seen": int((~occurring).sum()), "true_l0": classes.true_l0, "classes": classes.num_classes,
        "class_l0": classes.class_l0, "distinct_code_sets": classes.distinct_code_sets, "timing_tokens": timing.tokens,
        "tokens_per_s": timing.tokens_per_second, "hours_for_1e7": 1e7 / timing.tokens_per_second / 3600,
        "build_s": sum(stage.seconds.values()),
    }
    return row, stage


def shards(stage: Stage, w: np.ndarray, folder: Path, tokens: int, seed: int) -> ShardReader:
    """Activations of the last residual site under ``w`` (Zipf tokens), streamed once per folder
    (a finished folder with the same width, seed and size is reused)."""
    meta = folder / "meta.json"
    if meta.exists():
        done = json.loads(meta.read_text())
        if (done["width"], done["seed"], done["tokens"], done["zipf"]) != (w.shape[1], seed, tokens, ZIPF):
            raise ValueError(f"{folder} holds other activations (width {done['width']}, seed {done['seed']}, "
                             f"{done['tokens']} tokens, zipf {done['zipf']}); use another --cache")
    else:
        site = Site("resid", len(stage.compiled.config.layers))
        stream_activations(stage.compiled, site, folder, tokens, w, zipf=ZIPF, seed=seed, progress=False)
    return ShardReader(folder)


def coded_batches(reader: ShardReader, dictionary, truth):
    """``(activations, true codes)`` batches of a shard folder, codes in ``truth``'s order."""
    for b in reader.batches(8192, ("activations", "code_index", "code_value", "dense_codes")):
        yield b["activations"], truth.codes(dense_codes(b["code_index"], b["code_value"], dictionary.num_features),
                                            b["dense_codes"])


def convergence(curve: list, part: str | None = None) -> float:
    """Relative drop of the mean loss (or of one of its ``part``s, e.g. ``mse_loss``) from the
    second-to-last to the last fifth of the recorded curve (0 on a flat curve; near 0 means
    converged at this learning rate)."""
    losses = np.array([point.loss if part is None else point.parts.get(part, point.loss) for point in curve])
    fifth = max(1, len(losses) // 5)
    before, last = losses[-2 * fifth:-fifth].mean(), losses[-fifth:].mean()
    return float((before - last) / max(abs(before), 1e-12))


def sae_scores(stage: Stage, w: np.ndarray, arch: str, k: int, steps: int, folder: Path, tokens: int,
               eval_tokens: int, lr: float, warmup: int, decay: int, seed: int = 0) -> dict:
    """Train one SAELens SAE (latents = true directions) on a training pool of ``tokens`` activations
    (``warmup`` steps of linear warm-up, the last ``decay`` steps decaying linearly to 0) and score
    it on ``eval_tokens`` held-out activations (other inputs), spliced and causally. ``seed`` seeds
    the SAE's initialisation and the order of its training batches (the activations are the same
    for every seed)."""
    from compiler.lab.features import TorchCoder, train_sae

    model = stage.compiled
    site = Site("resid", len(model.config.layers))
    dictionary = true_dictionary(model, site, w)
    train = shards(stage, w, folder / "train", tokens, seed=0)
    held_out = shards(stage, w, folder / "eval", eval_tokens, seed=1)
    occurring, dense_range = data_profile(held_out.batches(8192, ("code_index", "dense_codes")),
                                          dictionary.num_features)
    truth = ground_truth(dictionary, occurring, dense_range)
    curve: list = []
    start, cpu = time.perf_counter(), time.process_time()
    sae = train_sae(train.folder, d_sae=len(truth.labels), k=k, steps=steps, batch_size=1024, lr=lr, architecture=arch,
                    history=curve, log_every=max(1, steps // 100), warmup_steps=warmup, decay_steps=decay, seed=seed)
    train_s, train_cpu_s = time.perf_counter() - start, time.process_time() - cpu
    coder = TorchCoder(sae)

    def batches():
        return coded_batches(held_out, dictionary, truth)

    scores = synthetic_scores(coder, truth, batches())
    classes = cofiring(codes for _, codes in batches())
    class_vectors = classes.class_vectors(truth.vectors)
    ids = sample_ids(model, 1000, seed=9, zipf=ZIPF)
    refs = rasp_references(model, stage.programs, ids)
    spliced = spliced_accuracy(model, coder, refs, site, w).sequence
    use = causal_use(model, dictionary, coder, ids[:400], w, examples=1, truth=truth)
    perfect = synthetic_scores(perfect_coder(truth), truth, batches())
    return {"stage": stage.spec.name, "arch": arch, "d": int(w.shape[1]), "k": k, "seed": seed, "latents": len(truth.labels),
            "true_l0": scores.true_l0, "sae_l0": scores.sae_l0, "dead": scores.dead_latents,
            "shrinkage": scores.shrinkage, "ev": scores.explained_variance, "mcc": scores.mcc,
            "uniqueness": scores.uniqueness, "precision": scores.classification.precision,
            "recall": scores.classification.recall, "f1": scores.classification.f1_score, "spliced": spliced,
            "causal": use.fraction, "causal_used": use.used, "perfect_mcc": perfect.mcc,
            "perfect_f1": perfect.classification.f1_score, "classes": classes.num_classes,
            "class_l0": classes.class_l0, "class_mcc": dictionary_mcc(class_vectors, truth.vectors),
            "mcc_vs_classes": (dictionary_mcc(coder.decoder, class_vectors)
                               if classes.num_classes < CLASS_SHARE * len(truth.labels) else None),
            "steps": steps, "samples": steps * 1024, "lr": lr,
            "warmup": warmup, "decay": decay, "train_tokens": tokens, "eval_tokens": eval_tokens, "train_s": train_s,
            "train_cpu_s": train_cpu_s,
            "loss_first": curve[0].loss, "loss_last": curve[-1].loss, "loss_drop_last_fifth": convergence(curve),
            "mse_drop_last_fifth": convergence(curve, "mse_loss"),
            "curve": [[point.step, point.loss, point.lr, point.parts.get("mse_loss", point.loss)] for point in curve]}


def write_results(out: Path, name: str, rows: list[dict]) -> None:
    """``saes_<name>.json`` and the two plots of ``rows``. The recovery plot's panels hold the rows
    of the first row's architecture and training length: against d at the first row's k, and
    against k at the packed width."""
    atomic_write_text(out / f"saes_{name}.json", json.dumps(rows, indent=1))
    first = rows[0]
    main = [r for r in rows if r["arch"] == first["arch"] and r["steps"] == first["steps"]]
    by_width = [r for r in main if r["k"] == first["k"]]
    by_l0 = [r for r in main if r["d"] == r.get("packed_d", first["d"])]
    recovery_plot(out / f"recovery_{name}.png", by_width, by_l0,
                  f"{first['arch']} SAEs on the {name} compiled model ({first['steps']:,} steps)")
    # The reconstruction term where every row recorded it: the total jumps when SAELens' dead-latent
    # (auxiliary) loss starts, at step dead_feature_window = 1,000, and falls as latents revive.
    mse = all(len(point) > 3 for r in rows for point in r["curve"])
    curves = {f"{r['arch']} d={r['d']} k={r['k']} seed={r.get('seed', 0)} ({r['steps']:,} steps)": [(p[0], p[3] if mse else p[1])
                                                                           for p in r["curve"]] for r in rows}
    what = "reconstruction loss" if mse else "loss"
    loss_plot(out / f"loss_{name}.png", curves, f"SAELens training {what}, {name} model",
              "reconstruction (MSE) loss" if mse else "training loss")


def true_topk(stage: Stage, folder: Path, eval_tokens: int, ks: list[int]) -> dict:
    """The true L0's spread on held-out activations at the packed width, and the explained variance
    of the true dictionary cut to each k (:class:`TopKOf`): what a TopK SAE of that k reaches if it
    holds the true dictionary (a reference, not a bound: a learned dictionary can do better)."""
    model = stage.compiled
    dictionary = true_dictionary(model, Site("resid", len(model.config.layers)), stage.projection)
    held_out = shards(stage, stage.projection, folder / "eval", eval_tokens, seed=1)
    truth = ground_truth(dictionary, *data_profile(held_out.batches(8192, ("code_index", "dense_codes")),
                                                   dictionary.num_features))
    l0 = np.concatenate([np.sum(codes != 0, axis=1) for _, codes in coded_batches(held_out, dictionary, truth)])
    ceilings = {k: synthetic_scores(TopKOf(perfect_coder(truth), k), truth,
                                    coded_batches(held_out, dictionary, truth)).explained_variance for k in ks}
    return {"stage": stage.spec.name, "d": stage.d, "eval_tokens": eval_tokens, "true_l0_mean": float(l0.mean()),
            "true_l0_percentiles": {str(q): float(np.percentile(l0, q)) for q in (10, 50, 90, 100)},
            "ev_of_true_dictionary_cut_to_k": {str(k): ev for k, ev in ceilings.items()}}


def print_table(rows: list[dict], keys: list[str]) -> None:
    print(" | ".join(keys))
    for row in rows:
        values = [row.get(k, "") for k in keys]
        print(" | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", default="1k,4k,16k", help=f"comma-separated, of {sorted(STAGES)}; empty: SAE "
                                                              "baselines only")
    parser.add_argument("--samples", type=int, default=10_000, help="sampled inputs checked against RASP")
    parser.add_argument("--timing-tokens", type=int, default=200_000)
    parser.add_argument("--sae-stage", default="1k", help="stage whose SAE baselines are trained; empty: none")
    parser.add_argument("--widths", default="packed,160,144,128",
                        help="compression widths d for the SAE dial ('packed': the stage's own width, the "
                             "packed projection's full-margin width unless the stage sets one)")
    parser.add_argument("--archs", default="topk,batchtopk",
                        help="SAELens architectures: the first at every width and k value, the others at the "
                             "packed width")
    parser.add_argument("--lr", type=float, default=1e-3, help="learning rate of the SAEs")
    parser.add_argument("--warmup", type=int, default=0, help="steps of linear learning-rate warm-up")
    parser.add_argument("--decay", type=float, default=0.2,
                        help="share of the steps, at the end, over which the learning rate decays linearly to 0 "
                             "(0: constant)")
    parser.add_argument("--cache", default="", help="folder for the activation shards, reused by later runs "
                                                    "(default: a fresh temporary folder)")
    parser.add_argument("--true-topk", default="",
                        help="comma-separated k: print and write (true_topk_<stage>.json) the explained variance "
                             "of the true dictionary cut to k latents per activation at the packed width, and stop")
    parser.add_argument("--merge", default="",
                        help="comma-separated saes_<stage>.json files of earlier runs: write their rows together "
                             "(the JSON and both plots under --out, named by --sae-stage) and stop")
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--seeds", default="0", help="comma-separated SAE seeds (initialisation and batch order): "
                                                     "every SAE is trained once per seed")
    add_json_argument(parser)
    parser.add_argument("--k", type=int, default=0, help="k at every width (default: the true L0 at the last site "
                                                          "on 500 inputs, rounded)")
    parser.add_argument("--ks", default=None, help="k values of the first architecture at the stage's width "
                                                    "(default: half, once and twice the true L0; empty: none)")
    parser.add_argument("--sae-steps", type=int, default=6000, help="optimizer steps of 1,024 activations")
    parser.add_argument("--sae-tokens", type=int, default=500_000, help="training pool (cycled)")
    parser.add_argument("--eval-tokens", type=int, default=50_000, help="held-out activations scored")
    parser.add_argument("--stages-json", type=Path, metavar="PATH",
                        help="also save the stage table with its command and machine (benchmarks/results.py)")
    parser.add_argument("--out", default="features-results", help="folder for stages.json, saes.json, recovery.png")
    args = parser.parse_args()
    out = Path(args.out)
    if args.merge:
        merged = [row for path in args.merge.split(",") if path for row in json.loads(Path(path).read_text())]
        write_results(out, args.sae_stage, merged)
        print(f"{len(merged)} rows: {out}/saes_{args.sae_stage}.json, recovery_{args.sae_stage}.png, "
              f"loss_{args.sae_stage}.png")
        return
    work = Path(tempfile.mkdtemp(prefix="features-"))
    rows, stages = [], {}
    for name in [n for n in args.stages.split(",") if n]:
        row, stages[name] = stage_row(name, args.samples, args.timing_tokens, work)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if rows:
        print("\n## Stages (Zipf(1) tokens; time for 10^7 activations extrapolated from timing_tokens)\n")
        print_table(rows, ["stage", "features", "dense", "dropped", "D", "d", "features_per_dim", "bound_exact",
                       "samples", "accuracy", "freq_min", "freq_median", "freq_max", "never_seen", "true_l0",
                       "classes", "class_l0", "distinct_code_sets",
                            "timing_tokens", "tokens_per_s", "hours_for_1e7", "build_s"])
        for row in rows:
            print(f"{row['stage']}: L0 per residual site {[round(x, 2) for x in row['l0_per_site']]}")
        atomic_write_text(out / "stages.json", json.dumps(rows, indent=1))
        if args.stages_json is not None:
            publish(stage_table(rows), args.stages_json)
    try:
        importlib.import_module("sae_lens")
    except ImportError:
        print("\nSAE baselines skipped: sae_lens is not importable in this environment (it needs "
              "transformer-lens<4; run this script with the venv that has the 'sae' extra).")
        return
    if not args.sae_stage:
        return
    base = stages.get(args.sae_stage) or build_stage(STAGES[args.sae_stage])
    structure = base.structure
    if args.true_topk:
        found = true_topk(base, (Path(args.cache) if args.cache else work) / f"{args.sae_stage}_d{base.d}",
                          args.eval_tokens, [int(k) for k in args.true_topk.split(",") if k])
        print(json.dumps(found), flush=True)
        atomic_write_text(out / f"true_topk_{args.sae_stage}.json", json.dumps(found, indent=1))
        return
    true_l0 = l0_per_site(base)[-1]
    widths = [base.d if x == "packed" else int(x) for x in args.widths.split(",") if x]
    ks = ([max(1, round(true_l0 * f)) for f in (0.5, 1, 2)] if args.ks is None
          else [int(x) for x in args.ks.split(",") if x])
    k0 = args.k or max(1, round(true_l0))
    archs = [a for a in args.archs.split(",") if a]
    rows = []
    import torch  # one intra-op thread: on a shared 2-core machine more threads made each step 5x slower

    torch.set_num_threads(args.torch_threads)
    # the first architecture at every width, the others at the packed width, then the other k values
    runs = ([(d, archs[0], k0) for d in widths] + [(base.d, arch, k0) for arch in archs[1:]]
            + [(base.d, archs[0], k) for k in ks if k != k0])
    seeds = [int(x) for x in args.seeds.split(",") if x]
    name = args.sae_stage
    cache = Path(args.cache) if args.cache else work
    decay = round(args.decay * args.sae_steps)
    for (d, arch, k), seed in ((run, seed) for run in runs for seed in seeds):
        w = base.projection if d == base.d else packed_projection(structure, d)
        row = sae_scores(base, w, arch, k, args.sae_steps, cache / f"{name}_d{d}", args.sae_tokens, args.eval_tokens,
                         args.lr, args.warmup, decay, seed)
        row["model_accuracy"] = exactness(base, 2000, w)
        row["bound_exact"] = interference_bound(structure, w).claims_exact
        row["packed_d"] = base.d
        rows.append(row)
        print(json.dumps({key: value for key, value in row.items() if key != "curve"}), flush=True)
        # results so far, after every SAE: a long run stopped early keeps what it finished
        write_results(out, name, rows)
    keys = ["arch", "d", "k", "seed", "latents", "true_l0", "sae_l0", "dead", "shrinkage", "ev", "mcc", "uniqueness",
            "precision", "recall", "f1", "spliced", "causal", "perfect_mcc", "perfect_f1", "classes", "class_l0",
            "class_mcc", "mcc_vs_classes", "steps", "warmup", "decay", "train_s", "train_cpu_s",
            "loss_first", "loss_last", "loss_drop_last_fifth", "mse_drop_last_fifth", "model_accuracy", "bound_exact"]
    print(f"\n## SAELens SAEs on the {name} model (last residual site; scored on held-out activations)\n")
    print_table(rows, keys)
    print(f"tables, curves and plots: {out}/saes_{name}.json, recovery_{name}.png, loss_{name}.png")
    if args.json is not None:
        publish(sae_table(rows, name, args), args.json)


STAGE_TIMINGS = ("build s", "activations / s", "10^7 activations (h, extrapolated)")


def stage_table(rows: list[dict]) -> Table:
    """The stage rows as a published table (`benchmarks/results.py`): counts, the bound's verdict,
    exactness against RASP, L0 and the frequency profile; build and generation times as its timing
    columns (measured on `--timing-tokens` activations after a warm-up batch)."""
    columns = ("stage", "V, N", "features (last site)", "D", "d", "features / d", "bound", "exact on sampled inputs",
               "L0 per residual site (embed, ..., last; 500 inputs)", "feature frequency: median, largest",
               "features seen", "co-firing classes: count, L0 of true / class codes", *STAGE_TIMINGS)
    cells = []
    for row in rows:
        spec = STAGES[row["stage"]]
        n = spec.offsets if isinstance(spec, CopySpec) else spec.branches
        verdict = "exact" if row["bound_exact"] else "not claimed"
        cells.append((
            row["stage"], f"{spec.vocab_size}, {n}", f"{row['features']:,}", f"{row['D']:,}", str(row["d"]),
            f"{row['features_per_dim']:.1f}", f"{verdict} (load {row['max_load']:.2f})",
            f"{round(row['accuracy'] * row['samples']):,} / {row['samples']:,}",
            ", ".join(f"{x:.1f}" for x in row["l0_per_site"]),
            f"{row['freq_median']:.2g}, {row['freq_max']:.2f}", f"{row['features'] - row['never_seen']:,}",
            f"{row['classes']:,}: {row['true_l0']:.1f} / {row['class_l0']:.1f}",
            f"{row['build_s']:.0f}", f"{row['tokens_per_s']:,.0f}", f"{row['hours_for_1e7']:.2f}"))
    caption = ("Feature frequencies, features seen and co-firing classes over 100,000 activations of the last "
               "residual site (Zipf(1) tokens); exactness is the decoded output of the compressed model against "
               "RASP on sampled inputs.")
    return Table(columns, tuple(cells), timings=STAGE_TIMINGS, caption=caption)


SAE_COLUMNS = (("seed", "seed"), ("arch", "arch"), ("d", "d"), ("k", "k"), ("sae_l0", "SAE L0"), ("dead", "dead"),
               ("shrinkage", "shrinkage"), ("ev", "explained variance"), ("mcc", "MCC"), ("uniqueness", "uniqueness"),
               ("f1", "F1"), ("spliced", "spliced"), ("causal", "causal"), ("train_s", "train s"))


def sae_table(rows: list[dict], stage: str, args: argparse.Namespace) -> Table:
    """The SAE rows as a published table (`benchmarks/results.py`): the scores at three decimals,
    the training seconds as its timing column."""
    def cell(value) -> str:
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    cells = tuple(tuple(cell(row[key]) for key, _ in SAE_COLUMNS) for row in rows)
    first = rows[0]
    schedule = f"decaying linearly to 0 over the last {args.decay:.0%} of the steps" if args.decay else "constant rate"
    caption = (f"SAELens SAEs on the {stage} model's last residual site (latents = the {first['latents']} true "
               f"directions, true L0 {first['true_l0']:.2f}): {args.sae_steps} steps of 1,024 activations from a pool of "
               f"{args.sae_tokens:,} (learning rate {args.lr:g}, {args.warmup} warm-up steps, {schedule}), scored on "
               f"{args.eval_tokens:,} held-out activations; "
               f"{args.torch_threads} torch thread{'s' if args.torch_threads != 1 else ''}.")
    return Table(tuple(title for _, title in SAE_COLUMNS), cells, timings=("train s",), caption=caption)

if __name__ == "__main__":
    main()

"""`tracr-compile circuit`: the verified circuit of a program as JSON and a picture.

    tracr-compile circuit --example reverse --ablation mean --variant a --out reverse_mean

writes `reverse_mean.json` (a `compiler.lab.circuits.CircuitRecord`, one per ablation
when several are asked for: `<out>_<ablation>.json`) and `<out>.png` / `<out>_<ablation>.png`,
and prints one line per ablation: edges in the circuit, the verification, the difference from the
structural circuit.
"""

from __future__ import annotations

import argparse

from compiler.cli.args import ProgramError, UsageError
from compiler.examples import CATALOGUE

DESCRIPTION = "Measure, verify and draw the circuit of a compiled program."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `circuit`."""
    parser.add_argument("program", nargs="?", help="path/to/file.py:name (an s-op or a zero-argument function)")
    parser.add_argument("--example", metavar="NAME", help="a library program, loops included (parity_loop, addition_loop)")
    parser.add_argument("--vocab", help="tokens: a,b,c | JSON list | integer range 0..9 (needed for a program file)")
    parser.add_argument("--max-seq-len", type=int, metavar="N", help="longest input, BOS excluded")
    parser.add_argument("--ablation", default="zero", help="zero, mean, resample, or several joined by ',' (default zero)")
    parser.add_argument("--variant", default="a", help="a exact, b analytic, c GD, d distractors, e reparametrised, f distributed heads, g interference, "
                                                       "h layernorm; letters join with '+'; b@0.6 / c@0.6 squeeze the projection to 0.6 of its "
                                                       "smallest exact width; g@2 sets the interference to 2 decision "
                                                       "margins (default a)")
    parser.add_argument("--inputs", type=int, default=64, metavar="N", help="sampled inputs (default 64)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the inputs and of the variant (default 0)")
    parser.add_argument("--unique-tokens", action="store_true", help="inputs without repeated tokens (sort_unique)")
    parser.add_argument("--per-position", action="store_true", help="also measure the per-position circuit")
    parser.add_argument("--out", metavar="PATH", required=True, help="path without suffix for the .json and .png")


def run(args: argparse.Namespace) -> int:
    """Measure, verify, save and draw; returns the exit code.

    Raises:
      UsageError: a bad flag value (an unknown ablation or variant, too few inputs, an --out
        path that cannot be written), found before any work.
      ProgramError: the circuit cannot be measured on this program (the message says why).
    """
    try:
        return _run(args)
    except ValueError as error:  # the lab's refusals (e.g. a variant this program cannot take)
        raise ProgramError(" ".join(str(error).split())) from None


def _program(args: argparse.Namespace):
    from compiler.cli.args import load_program, parse_vocab

    if bool(args.program) == bool(args.example):
        raise UsageError("give exactly one of a program path or --example")
    if args.example:
        if args.example not in CATALOGUE:
            raise UsageError(f"unknown example {args.example!r}; choose from {', '.join(CATALOGUE)}")
        example = CATALOGUE[args.example]
        max_seq_len = args.max_seq_len or example.max_seq_len
        vocab = parse_vocab(args.vocab) if args.vocab else example.vocab
        return example.build(max_seq_len), tuple(vocab), max_seq_len
    if args.vocab is None or args.max_seq_len is None:
        raise UsageError("a program file needs --vocab and --max-seq-len")
    program, _ = load_program(args.program)
    return program, tuple(parse_vocab(args.vocab)), args.max_seq_len


def _run(args: argparse.Namespace) -> int:
    from compiler.lab.circuits import InputDistribution, check_ablation, circuit_records, draw, parse_variant

    ablations = [a.strip() for a in args.ablation.split(",")]
    try:
        for ablation in ablations:
            check_ablation(ablation)
        parse_variant(args.variant)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if args.inputs < 2:
        raise UsageError(f"--inputs must be at least 2, got {args.inputs}")
    from compiler.atomic import check_target

    stems = [args.out] if len(ablations) == 1 else [f"{args.out}_{a}" for a in ablations]
    for stem in stems:  # refuse a bad destination before measuring
        for suffix in (".json", ".png"):
            check_target(f"{stem}{suffix}")
    program, vocab, max_seq_len = _program(args)
    distribution = InputDistribution(args.inputs, args.seed, unique_tokens=args.unique_tokens)
    records = circuit_records(program, vocab, max_seq_len, variant=args.variant, ablations=ablations,
                              distribution=distribution, per_position=args.per_position, seed=args.seed)
    for record in records:
        stem = args.out if len(records) == 1 else f"{args.out}_{record.ablation}"
        record.save(f"{stem}.json")
        draw(record, f"{stem}.png")
        v = record.verification
        diff = record.difference()
        print(f"{record.program} variant {record.variant} {record.ablation}: {sum(record.circuit)} of "
              f"{len(record.edges)} edges; sufficient {v.sufficient}, necessary {v.necessary}, minimal {v.minimal}; "
              f"structural only {len(diff['structural_only'])}, measured only {len(diff['measured_only'])} "
              f"-> {stem}.json, {stem}.png")
    return 0

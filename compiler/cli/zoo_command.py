"""`tracr-compile zoo generate OUT` (a model zoo; the flags map onto `ZooConfig`) and
`tracr-compile zoo audit FOLDER` (every record checked again), docs/zoo.md."""

from __future__ import annotations

import argparse
import json
import re
import sys

from compiler.cli.args import UsageError
from compiler.lab.zoo import VARIANTS, VOCAB_KINDS, ZooConfig

_RANGE = re.compile(r"^\s*(\d+)\s*(?:\.\.\s*(\d+))?\s*$")


def parse_range(text: str) -> tuple[int, int]:
    """`3..8` -> (3, 8); `5` -> (5, 5)."""
    match = _RANGE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a range; write e.g. 3..8 or 5")
    low = int(match[1])
    return low, int(match[2]) if match[2] is not None else low


def parse_names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


GENERATE = "Generate a dataset of compiled programs: one record per (program, variant) in sharded Parquet."
AUDIT = ("Check every record of a zoo folder again from its files: weight hashes, the program and the stored weights "
         "against the stored outputs, and compressed records against their claims.")


def add_generate_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `zoo generate`."""
    defaults = ZooConfig()
    parser.add_argument("out", help="dataset folder (created; an interrupted run resumes in it)")
    parser.add_argument("-n", "--programs", type=int, default=defaults.programs, help="number of programs")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--variants", type=parse_names, default=defaults.variants,
                        help=f"comma-separated, from {','.join(VARIANTS)} (default: {','.join(defaults.variants)})")
    parser.add_argument("--gd-steps", type=int, default=defaults.gd_steps,
                        help="gradient-descent budget of the gd variant (default %(default)s)")
    parser.add_argument("--measure-circuits", action="store_true",
                        help="check every variant's circuit on its weights by patching (about 1 s more per record; "
                             "reparametrised and gd records are always checked)")
    sampling = parser.add_argument_group("program sampling")
    sampling.add_argument("--operations", type=parse_names, default=defaults.operations,
                          help=f"statement kinds of random programs (default: {','.join(defaults.operations)})")
    sampling.add_argument("--sizes", type=parse_range, default=defaults.sizes, metavar="LO..HI",
                          help="operations per random program (default %(default)s)")
    sampling.add_argument("--depths", type=parse_range, default=defaults.depths, metavar="LO..HI",
                          help="program depth; programs outside are redrawn (default %(default)s)")
    sampling.add_argument("--numerical", type=float, default=defaults.numerical, metavar="P",
                          help="probability that a generated s-op is numerical (default: the generator's mix)")
    sampling.add_argument("--vocab-sizes", type=parse_range, default=defaults.vocab_sizes, metavar="LO..HI")
    sampling.add_argument("--vocab-kind", choices=VOCAB_KINDS, default=defaults.vocab_kind)
    sampling.add_argument("--max-seq-lens", type=parse_range, default=defaults.max_seq_lens, metavar="LO..HI")
    sampling.add_argument("--library-share", type=float, default=defaults.library_share, metavar="P",
                          help="probability of a library program instead of a random one (default %(default)s)")
    sampling.add_argument("--library", type=parse_names, default=defaults.library,
                          help="library programs that may be drawn (default: every straight-line one; the loop "
                               "programs parity_loop and addition_loop only when named)")
    sampling.add_argument("--causal", action="store_true", help="compile with causal attention")
    sampling.add_argument("--inputs", type=int, default=defaults.inputs, help="sample inputs per record")
    run = parser.add_argument_group("running")
    run.add_argument("--shard-size", type=int, default=defaults.shard_size, help="programs per shard")
    run.add_argument("--timeout", type=float, default=defaults.timeout_s, metavar="S", help="seconds per program")
    run.add_argument("--memory-mb", type=int, default=defaults.memory_mb, help="memory per program (MB)")
    run.add_argument("--engine", choices=("local", "ray"), default="local")
    run.add_argument("--jobs", type=int, default=None, help="worker processes / local Ray CPUs (default: all CPUs)")
    run.add_argument("--address", default=None, help="with --engine ray: the cluster (e.g. auto, ray://host:10001)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--json", action="store_true", help="print the summary as JSON")


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `zoo audit`."""
    parser.add_argument("folder", help="a zoo folder written by `zoo generate`")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def generate(args: argparse.Namespace) -> int:
    """Generate the zoo the flags describe and print a summary; returns the exit code.

    Raises:
      UsageError: a flag value `ZooConfig` refuses, or an output folder that holds another zoo.
    """
    try:
        config = ZooConfig(
            programs=args.programs, seed=args.seed, variants=args.variants, operations=args.operations,
            sizes=args.sizes, depths=args.depths, numerical=args.numerical, vocab_sizes=args.vocab_sizes,
            vocab_kind=args.vocab_kind, max_seq_lens=args.max_seq_lens, library_share=args.library_share,
            library=args.library, causal=args.causal, inputs=args.inputs, shard_size=args.shard_size,
            timeout_s=args.timeout, memory_mb=args.memory_mb, gd_steps=args.gd_steps,
            measure_circuits=args.measure_circuits,
        )
    except ValueError as error:
        raise UsageError(str(error)) from None
    from compiler.lab.zoo import ZooFolderError, generate_zoo

    try:
        summary = generate_zoo(args.out, config, engine=args.engine, jobs=args.jobs, address=args.address,
                               progress=not args.quiet)
    except ZooFolderError as error:
        raise UsageError(str(error)) from None
    report = {
        "out": str(summary.out), "shards_written": summary.shards_written, "shards_kept": summary.shards_kept,
        "programs": summary.programs, "seconds": round(summary.seconds, 3),
        "programs_per_second": round(summary.programs_per_second, 2),
        "megabytes_per_second": round(summary.megabytes_per_second, 3), "records": summary.statuses,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{summary.out}: {summary.shards_written} shard(s) written, {summary.shards_kept} kept; "
              f"{summary.programs} programs in {summary.seconds:.1f} s ({summary.programs_per_second:.1f} programs/s, "
              f"{summary.megabytes_per_second:.2f} MB/s)")
        for key, count in summary.statuses.items():
            print(f"  {key}: {count}")
    sys.stdout.flush()
    return 0


def audit(args: argparse.Namespace) -> int:
    """Audit a zoo folder; returns 0 when every record passes, 1 otherwise.

    Raises:
      UsageError: the folder holds no zoo shards.
    """
    from compiler.lab.zoo import audit_folder

    try:
        report = audit_folder(args.folder, progress=not args.quiet)
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    if args.json:
        print(json.dumps({"records": report.records, "checked": report.checked, "failures": list(report.failures),
                          "passed": report.passed}, indent=2))
    else:
        print(f"{args.folder}: {report.checked} ok records checked; "
              f"{'every record passed' if report.passed else f'{len(report.failures)} failed'}")
        for key, count in report.records.items():
            print(f"  {key}: {count}")
        for failure in report.failures:
            print(f"  FAILED {failure}")
    return 0 if report.passed else 1

"""`tracr-compile compile` (the default sub-command): compile a RASP program, run it, save it,
picture it (docs/cli.md)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from compiler.cli.args import UsageError, load_program, parse_input, parse_vocab
from compiler.examples import CATALOGUE
from compiler.model.config import NORMS
from compiler.passes.size_estimate import DEFAULT_MAX_WEIGHT_BYTES

PROG = "tracr-compile"
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 10**6, "mb": 10**6, "mib": 1 << 20,
          "g": 10**9, "gb": 10**9, "gib": 1 << 30}


PACKED_CHECK = 2_000  # inputs --packed checks the folded model on, at most


def _byte_count(text: str) -> int | None:
    """`--max-weight-bytes`: a number of bytes (`4e9`, `512MiB`, `2GB`) or `none` (no limit)."""
    if text.strip().lower() == "none":
        return None
    match = re.fullmatch(r"\s*([0-9.eE+]+)\s*([A-Za-z]*)\s*", text)
    unit = match[2].lower() if match else ""
    try:
        value = float(match[1]) * _UNITS[unit] if match else -1.0
    except (KeyError, ValueError):
        value = -1.0
    if not value >= 1:
        raise UsageError(f"--max-weight-bytes {text!r} is not a positive size; give e.g. 2GiB, 4e9 or none")
    return int(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `compile` (a program path, --example or --load; compiling, outputs)."""
    source = parser.add_argument_group("program (one of)")
    source.add_argument("program", nargs="?", help="path/to/file.py:name (an s-op or a zero-argument function)")
    source.add_argument("--example", metavar="NAME", help="a library program (see --list-examples)")
    source.add_argument("--load", metavar="PATH", help="a model file written by --out")
    parser.add_argument("--list-examples", action="store_true", help="list the library programs and exit")
    compiling = parser.add_argument_group("compiling")
    compiling.add_argument("--vocab", help="tokens: a,b,c | JSON list | integer range 0..9")
    compiling.add_argument("--max-seq-len", type=int, metavar="N", help="longest input, BOS excluded")
    compiling.add_argument("--causal", action="store_true", help="compile with causal (decoder) attention")
    compiling.add_argument(
        "--causal-strict", action="store_true",
        help="with --causal, refuse programs whose selectors may read later positions (else a warning)",
    )
    compiling.add_argument(
        "--norm", choices=NORMS,
        help="a LayerNorm or RMSNorm before every sub-layer and the unembedding, as standard transformers have",
    )
    compiling.add_argument("--bos", default="BOS", help="beginning-of-sequence token (default BOS)")
    compiling.add_argument("--pad", default="PAD", help="padding token (default PAD)")
    compiling.add_argument("--mlp-exactness", type=float, default=100, metavar="X", help="numerical MLP exactness (default 100)")
    compiling.add_argument(
        "--max-weight-bytes", type=_byte_count, default=DEFAULT_MAX_WEIGHT_BYTES, metavar="N",
        help="refuse a compile whose weights are estimated above N bytes (e.g. 4e9, 2GiB, none; default 1GiB)",
    )
    compiling.add_argument("--validate-only", action="store_true", help="list every problem, compile nothing")
    outputs = parser.add_argument_group("outputs")
    outputs.add_argument("--out", metavar="PATH", help="save the compiled model to PATH")
    outputs.add_argument(
        "--huggingface", metavar="FOLDER",
        help="write a Hugging Face GPT-2 checkpoint (config, weights, tokenizer) to FOLDER; needs --norm layernorm",
    )
    outputs.add_argument(
        "--packed", action="store_true",
        help="with --huggingface: fold the packed analytic projection (compression.analytic, at its full-margin width) "
             "into the checkpoint, so its stream is compressed; reports the width, whether the interference bound "
             f"claims the folded model exact, and its check against the uncompressed model ({PACKED_CHECK} inputs at most)",
    )
    outputs.add_argument("--input", metavar="TOKENS", help='run on e.g. "BOS x a c x" and print the residual stream')
    outputs.add_argument(
        "--plot", metavar="PATH",
        help="write residual, attention and head pictures; PATH ends in .png, .svg or .pdf (vector, for papers)",
    )
    outputs.add_argument("--dpi", type=float, default=150, help="resolution of --plot PNGs (default 150)")
    outputs.add_argument("--json", action="store_true", help="print a machine-readable summary instead of text")


def _packed(model: Any) -> tuple[Any, dict[str, Any]]:
    """The packed projection of `model`'s compiled coordinates and what it gives: the widths, the
    interference bound's claim, and the folded model against `model` on every input (a space of
    at most `PACKED_CHECK`) or on `PACKED_CHECK` distinct random ones."""
    from compiler.model.agree import same_outputs
    from compiler.model.folding import folded_model
    from compression.analytic import interference_bound, packed_projection, packed_width, residual_structure
    from compression.learned.sampling import distinct_inputs, enumerate_inputs
    from compression.task import input_space_of

    structure = residual_structure(model)
    w = packed_projection(structure, packed_width(structure))
    folded = folded_model(model, w)
    space = input_space_of(model)
    enumerated = space.size() <= PACKED_CHECK
    ids = enumerate_inputs(space) if enumerated else distinct_inputs(space, PACKED_CHECK, 0)
    batch = [[model.input_encoder.bos, *space.decode(row)] for row in ids]
    agree = sum(same_outputs(got, want) for got, want in zip(folded.apply_batch(batch), model.apply_batch(batch)))
    return w, {"width": model.config.residual_width, "folded_width": folded.config.residual_width,
               "claimed_exact": bool(interference_bound(structure, w).claims_exact),
               "checked": len(batch), "enumerated": enumerated, "agree": agree}


def _packed_text(packed: dict[str, Any]) -> str:
    inputs = "every input" if packed["enumerated"] else f"{packed['checked']} random inputs"
    claim = "claims it exact" if packed["claimed_exact"] else "does not claim it exact"
    return (f"packed: residual {packed['width']} -> {packed['folded_width']}; the interference bound {claim}; "
            f"it decodes like the uncompressed model on {packed['agree']} of {packed['checked']} ({inputs})")


def _list_examples() -> str:
    width = max(len(name) for name in CATALOGUE)
    lines = []
    for name, example in CATALOGUE.items():
        vocab = ",".join(str(t) for t in example.vocab)
        lines.append(
            f"{name.ljust(width)}  {example.description}  "
            f"[--vocab {vocab} --max-seq-len {example.max_seq_len}; "
            f"input: {' '.join(str(t) for t in example.example_input)}]"
        )
    return "\n".join(lines)


def _check_sources(args: argparse.Namespace) -> None:
    chosen = [flag for flag, value in (("program", args.program), ("--example", args.example), ("--load", args.load)) if value]
    if len(chosen) != 1:
        given = " and ".join(chosen) if chosen else "none"
        raise UsageError(f"give exactly one of a program path, --example or --load (got {given})")
    if args.load:
        compile_flags = [
            flag
            for flag, value in (
                ("--vocab", args.vocab),
                ("--max-seq-len", args.max_seq_len),
                ("--causal", args.causal),
                ("--causal-strict", args.causal_strict),
                ("--norm", args.norm),
                ("--validate-only", args.validate_only),
                ("--max-weight-bytes", args.max_weight_bytes != DEFAULT_MAX_WEIGHT_BYTES),
            )
            if value
        ]
        if compile_flags:
            raise UsageError(f"{', '.join(compile_flags)} only apply when compiling, not with --load")
    if args.example and args.example not in CATALOGUE:
        raise UsageError(f"unknown example {args.example!r}; choose from {', '.join(CATALOGUE)}")
    if args.plot and not args.plot.lower().endswith((".png", ".svg", ".pdf")):
        raise UsageError(f"--plot {args.plot!r}: end the path with .png, .svg or .pdf (the picture format)")
    if not args.dpi > 0:
        raise UsageError(f"--dpi must be positive, got {args.dpi:g}")
    if args.max_seq_len is not None and args.max_seq_len < 1:
        raise UsageError(f"--max-seq-len must be at least 1, got {args.max_seq_len}")


def _program(args: argparse.Namespace) -> tuple[Any, str | None, tuple[Hashable, ...], int, tuple | None]:
    """(s-op, source text, vocab, max_seq_len, default input) from a file or an example."""
    vocab = parse_vocab(args.vocab) if args.vocab is not None else None
    if args.example:
        example = CATALOGUE[args.example]
        max_seq_len = args.max_seq_len or example.max_seq_len
        program = example.build(max_seq_len)
        default_input = example.example_input if vocab is None else None
        return program, example.source(max_seq_len), vocab or example.vocab, max_seq_len, default_input
    if vocab is None or args.max_seq_len is None:
        raise UsageError("a program file needs --vocab and --max-seq-len")
    program, source = load_program(args.program)
    return program, source, vocab, args.max_seq_len, None


def _print_json(data: dict) -> None:
    print(json.dumps(data, indent=2, default=str))


def _validate(program: Any, vocab: tuple, max_seq_len: int, args: argparse.Namespace) -> int:
    from compiler.passes.validate import validate

    problems = validate(program, vocab, max_seq_len, causal=args.causal, causal_strict=args.causal_strict)
    if args.json:
        _print_json({"program": program.label, "ok": not problems, "problems": problems})
    elif not problems:
        print(f"{program.label}: compiles exactly (vocab of {len(vocab)}, max_seq_len {max_seq_len})")
    for problem in problems:
        print(f"{PROG}: problem: {' '.join(str(problem).split())}", file=sys.stderr)
    return 1 if problems else 0


def run(args: argparse.Namespace) -> int:
    """Compile (or load), then summarise, save, run and picture; returns the exit code."""
    if args.list_examples:
        print(_list_examples())
        return 0
    _check_sources(args)
    from compiler.atomic import check_target

    for target in (args.out, args.plot):  # refuse a bad destination before compiling
        if target is not None:
            check_target(target)
    if args.huggingface is not None:
        from compiler.io.huggingface import check_folder

        if not args.load and args.norm != "layernorm":
            raise UsageError("--huggingface writes a GPT-2 checkpoint, which has a LayerNorm before every sub-layer; "
                             "add --norm layernorm")
        check_folder(Path(args.huggingface))
    elif args.packed:
        raise UsageError("--packed compresses the Hugging Face checkpoint; give it with --huggingface FOLDER")
    report: dict[str, Any] = {}
    if args.load:
        from compiler.io.files import read_model_file

        loaded = read_model_file(args.load)
        model, source, default_input = loaded.model, loaded.source, None
        report["program"] = label = loaded.program_label
    else:
        program, source, vocab, max_seq_len, default_input = _program(args)
        if args.validate_only:
            return _validate(program, vocab, max_seq_len, args)
        from compiler.compiling import compile_rasp

        model = compile_rasp(
            program,
            vocab,
            max_seq_len,
            causal=args.causal,
            causal_strict=args.causal_strict,
            compiler_bos=args.bos,
            compiler_pad=args.pad,
            mlp_exactness=args.mlp_exactness,
            max_weight_bytes=args.max_weight_bytes,
            norm=args.norm,
        )
        report["program"] = label = program.label
    return _outputs(model, args, report, (source, label), default_input)


def _outputs(
    model: Any, args: argparse.Namespace, report: dict, program: tuple[str | None, str | None], default_input: tuple | None
) -> int:
    """Summary, saving, running and pictures; `program` is (source text, label) for saving."""
    from compiler.cli.summary import format_value, jsonable, model_summary, residual_table, summary_text

    report.update(model_summary(model))
    text = [f"program: {report['program']}", summary_text(report)]
    if args.out is not None:
        from compiler.io.files import save_model

        path = save_model(model, args.out, source=program[0], label=program[1])
        report["saved"] = str(path)
        text.append(f"saved model to {path} ({path.stat().st_size} bytes)")
    if args.huggingface is not None:
        from compiler.io.huggingface import to_huggingface

        projection = None
        if args.packed:
            projection, report["packed"] = _packed(model)
            text.append(_packed_text(report["packed"]))
        export = to_huggingface(model, args.huggingface, name=f"tracr-compile/{program[1]}" if program[1] else None,
                                projection=projection)
        report["huggingface"] = str(export.folder)
        text.append(f"wrote a Hugging Face GPT-2 checkpoint to {export.folder} ({len(export.tokens)} tokens, "
                    f"n_embd {export.n_embd}, {export.n_layer} layers of {export.n_head} heads)")
    tokens = None
    if args.input is not None:
        encoder = model.input_encoder
        tokens = parse_input(args.input, encoder.vocab, encoder.bos, encoder.pad)
    elif args.plot and default_input is not None:
        tokens = [model.input_encoder.bos, *default_input]
    elif args.plot:
        raise UsageError("--plot needs --input (only --example programs have a default input)")
    if tokens is not None:
        result = model.apply(tokens)
        report["input"] = jsonable(tokens)
        report["decoded"] = jsonable(result.decoded)
        text.append(f"input:  {' '.join(format_value(t) for t in tokens)}")
        text.append(f"output: {' '.join(format_value(v) for v in result.decoded)}")
        if args.input is not None:
            text.append(residual_table(result, tokens))
    if args.plot:
        from compiler.cli.plots import plot_all

        assert tokens is not None  # --plot without an input raised above
        written = plot_all(model, tokens, args.plot, dpi=args.dpi)
        report["plots"] = [str(p) for p in written]
        text.append("wrote " + ", ".join(str(p) for p in written))
    if args.json:
        _print_json(report)
    else:
        print("\n".join(text))
    return 0

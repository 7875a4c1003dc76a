"""`tracr-compile`: one command with sub-commands, one parser and one error wrapper (docs/cli.md).

    tracr-compile [compile] ...          compile a RASP program; run, save, summarise, picture it
    tracr-compile circuit ...            measure, verify and draw a program's circuit
    tracr-compile zoo generate OUT ...   generate a model zoo
    tracr-compile zoo audit FOLDER       check every record of a zoo again
    tracr-compile fuzz ...               differential fuzzing of the compiler

`compile` is the default: an argument list that does not start with a sub-command's name is
compile's (`tracr-compile --example frac_prevs`). `--debug` is accepted anywhere.

Exit codes: 0 success, 1 the work failed (a program cannot be compiled or run, a model file is
refused, a fuzz found a mismatch, an audit a failing record), 2 usage error. Every failure is one
line on stderr; `--debug` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from compiler.cli import circuit, compile_command, zoo_command
from compiler.cli.args import ProgramError, UsageError
from compiler.errors import CompilerError

PROG = "tracr-compile"
COMMANDS = ("compile", "circuit", "zoo", "fuzz")
DEBUG = "--debug"


class _Parser(argparse.ArgumentParser):
    """Reports argument errors as `UsageError` (one line) instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _fuzz(args: argparse.Namespace) -> int:
    from compiler.atomic import check_target
    from compiler.fuzzing.driver import run_arguments

    if args.results is not None:
        check_target(args.results)
    return run_arguments(args)


def _add_fuzz_arguments(parser: argparse.ArgumentParser) -> None:
    from compiler.fuzzing.driver import add_arguments

    add_arguments(parser)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: each sub-command's parser sets `run` to the function that runs it."""
    debug = _Parser(add_help=False)
    debug.add_argument(DEBUG, action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    parser = _Parser(
        prog=PROG, parents=[debug],
        description="Compile RASP programs into transformers and study them. `compile` is the default sub-command: "
                    f"`{PROG} --example frac_prevs` is `{PROG} compile --example frac_prevs`.",
        epilog="Exit codes: 0 success, 1 the work failed, 2 usage error. "
               f"`{PROG} COMMAND --help` lists a sub-command's flags.",
    )
    commands = parser.add_subparsers(title="sub-commands", metavar="COMMAND", parser_class=_Parser)

    def command(parent: argparse._SubParsersAction, name: str, summary: str, description: str,
                add: Callable[[argparse.ArgumentParser], None], run: Callable[[argparse.Namespace], int]) -> None:
        sub = parent.add_parser(name, help=summary, description=description, parents=[debug])
        add(sub)
        sub.set_defaults(run=run)

    command(commands, "compile", "(the default) compile a RASP program; run, save, summarise or picture it",
            "Compile a RASP program into a transformer; run, save, summarise or picture it.",
            compile_command.add_arguments, compile_command.run)
    command(commands, "circuit", "measure, verify and draw the circuit of a compiled program", circuit.DESCRIPTION,
            circuit.add_arguments, circuit.run)
    zoo = commands.add_parser("zoo", help="generate or audit a model zoo (sharded Parquet)", parents=[debug],
                              description="Model zoos: datasets of compiled programs with their ground truth.")
    actions = zoo.add_subparsers(title="actions", metavar="ACTION", parser_class=_Parser, required=True)
    command(actions, "generate", "generate a zoo into a folder (resumes an interrupted run)", zoo_command.GENERATE,
            zoo_command.add_generate_arguments, zoo_command.generate)
    command(actions, "audit", "check every record of a zoo folder again", zoo_command.AUDIT,
            zoo_command.add_audit_arguments, zoo_command.audit)
    command(commands, "fuzz", "differential fuzzing: random programs compiled and checked against RASP",
            "Random RASP programs, compiled and checked against the RASP evaluator (non-causal and causal).",
            _add_fuzz_arguments, _fuzz)
    return parser


def with_command(argv: Sequence[str]) -> list[str]:
    """`argv` with its sub-command named: `compile` is put before an argument list whose first
    argument (other than --debug) is neither a sub-command nor a request for the top-level help."""
    argv = list(argv)
    first = next((i for i, arg in enumerate(argv) if arg != DEBUG), None)
    if first is not None and argv[first] in (*COMMANDS, "-h", "--help"):
        return argv
    at = len(argv) if first is None else first
    return [*argv[:at], "compile", *argv[at:]]


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    argv = with_command(sys.argv[1:] if argv is None else argv)
    debug = DEBUG in argv
    try:
        args = build_parser().parse_args(argv)
        return args.run(args)
    except BrokenPipeError:  # stdout closed early (e.g. piped into head): stop quietly
        sys.stdout = open(os.devnull, "w")  # keeps the interpreter's final flush quiet
        return 1
    except SystemExit as exit_:  # --help
        return int(exit_.code or 0)
    except UsageError as error:
        if debug:
            raise
        print(f"{PROG}: usage error: {_one_line(error)} (see {PROG} --help)", file=sys.stderr)
        return 2
    except (CompilerError, ProgramError) as error:
        if debug:
            raise
        print(f"{PROG}: error: {_one_line(error)}", file=sys.stderr)
        return 1
    except Exception as error:  # an unexpected crash still gets one line without --debug
        if debug:
            raise
        print(f"{PROG}: internal error: {type(error).__name__}: {_one_line(error)} (rerun with --debug)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

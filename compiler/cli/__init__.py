"""The ``tracr-compile`` command line: arguments, example programs, summaries and pictures."""

from compiler.cli.command_line import main

__all__ = ["main"]

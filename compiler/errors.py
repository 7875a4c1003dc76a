"""The compiler's exception hierarchy.

Every error the compiler raises on purpose derives from `CompilerError`, so callers (the CLI, the
fuzzer) can tell a documented refusal from a crash. Messages name the s-op label, the argument and
what to do instead.
"""

from __future__ import annotations


class CompilerError(Exception):
    """Root of every deliberate compiler error."""


class UnsupportedProgramError(CompilerError):
    """The program cannot be compiled exactly; `problems` lists every reason found."""

    def __init__(self, problems: list[str] | tuple[str, ...]):
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        count = len(self.problems)
        super().__init__(
            f"the program cannot be compiled exactly ({count} problem{'s' if count != 1 else ''}):\n"
            f"{lines}"
        )


class ValueInferenceError(CompilerError):
    """The finite value set of an s-op could not be computed."""


class InvalidInputError(CompilerError, ValueError):
    """An input to a compiled model (token, length, BOS) is outside what it was compiled for."""


class ModelFileError(CompilerError):
    """A saved model file is truncated, corrupted, edited or from another format version."""


class CausalSemanticsWarning(UserWarning):
    """A causal compilation whose selectors may select later positions.

    The compiled model then computes `rasp.evaluate(program, xs, causal=True)` (every selector
    masked to keys at or before the query), which can differ from the plain evaluation; e.g. a
    causal `reverse` does not reverse. `compile_rasp(..., causal_strict=True)` refuses instead.
    """

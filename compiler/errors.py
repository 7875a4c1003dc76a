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


class LabError(CompilerError, ValueError):
    """A laboratory tool (`compiler.lab`: circuits, features, zoos) was asked for something it
    cannot do: an unknown variant or ablation, a site the model lacks, a bad zoo setting. The
    message names the argument and what to pass instead. A ValueError too, so callers that
    caught bad arguments as ValueError still do."""


class CompressionError(CompilerError, ValueError):
    """`compression` was given what it cannot work with: a projection of the wrong shape, an
    unknown method or objective, a setting out of range, an output with no values. The message
    names the argument and what to pass instead; a ValueError too, as `LabError`."""


class ModelFileError(CompilerError):
    """A model file cannot be read or written.

    Reading: the file is truncated, corrupted, edited or from another format version. Writing:
    the path is a folder, a special file (a device, a pipe), under a file used as a folder, empty,
    or in a place the process cannot write to. The message names the path and what to do.
    """


class ModelSizeError(CompilerError):
    """The compiled model's weights would exceed `compile_rasp(max_weight_bytes=...)`.

    Raised from size estimates made before any weight matrix is built, so an oversized compile
    is refused in well under a second instead of running out of memory minutes later. `label`
    names the largest s-op, `estimated_bytes` the whole model's estimate and `limit` the bound.
    """

    def __init__(self, message: str, label: str, estimated_bytes: int, limit: int):
        super().__init__(message)
        self.label = label
        self.estimated_bytes = estimated_bytes
        self.limit = limit


class ModelSizeWarning(UserWarning):
    """A compile whose weights are large but within `max_weight_bytes` (a quarter of it or more)."""


class CausalSemanticsWarning(UserWarning):
    """A causal compilation whose selectors may select later positions.

    The compiled model then computes `rasp.evaluate(program, xs, causal=True)` (every selector
    masked to keys at or before the query), which can differ from the plain evaluation; e.g. a
    causal `reverse` does not reverse. `compile_rasp(..., causal_strict=True)` refuses instead.
    """

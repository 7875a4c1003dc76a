"""The RASP compiler: trace, infer values, validate, lower to Craft, assemble, build the model.

The package is laid out in pipeline order: `compiler.passes` (numpy and networkx only),
`compiler.model` (configuration records, the Haiku transformer, encoders, weight access),
`compiler.io` (model files, export), `compiler.cli` (the command line) and `compiler.fuzzing`;
at the bottom, `compiler.errors` (the error classes) and `compiler.atomic` (atomic file writes,
used by every layer that writes files).

The entry points are importable from here: `compile_rasp` (and Tracr's `compile_rasp_to_model`),
`CompiledModel`, `save_model` / `load_model` and `to_transformer_lens`, with the error classes.
Names that need JAX are imported on first use (PEP 562), so `import compiler.passes.validate` (or
`from compiler import validate`) works without JAX (see docs/architecture.md for the packages
that load lazily, and why).
"""

from __future__ import annotations

import importlib
from typing import Any

from compiler.errors import (
    CausalSemanticsWarning,
    CompilerError,
    CompressionError,
    InvalidInputError,
    LabError,
    ModelFileError,
    ModelSizeError,
    ModelSizeWarning,
    UnsupportedProgramError,
    ValueInferenceError,
)
from compiler.passes.validate import validate

# Public names loaded on first access, with the module defining each.
_LAZY = {
    "ApplyResult": "compiler.model.compiled_model",
    "CompiledModel": "compiler.model.compiled_model",
    "LabelledResidual": "compiler.model.compiled_model",
    "COMPILER_BOS": "compiler.compiling",
    "COMPILER_PAD": "compiler.compiling",
    "compile_rasp": "compiler.compiling",
    "compile_rasp_to_model": "compiler.compiling",
    "load_model": "compiler.io.files",
    "save_model": "compiler.io.files",
    "to_transformer_lens": "compiler.io.export",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'compiler' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ApplyResult",
    "COMPILER_BOS",
    "COMPILER_PAD",
    "CausalSemanticsWarning",
    "CompiledModel",
    "CompilerError",
    "CompressionError",
    "InvalidInputError",
    "LabError",
    "LabelledResidual",
    "ModelFileError",
    "ModelSizeError",
    "ModelSizeWarning",
    "UnsupportedProgramError",
    "ValueInferenceError",
    "compile_rasp",
    "compile_rasp_to_model",
    "load_model",
    "save_model",
    "to_transformer_lens",
    "validate",
]

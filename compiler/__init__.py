"""The RASP compiler: trace, infer values, validate, lower to Craft, assemble, build the model."""

from compiler.model.compiled_model import ApplyResult, CompiledModel, LabelledResidual
from compiler.compiling import COMPILER_BOS, COMPILER_PAD, compile_rasp, compile_rasp_to_model
from compiler.errors import (
    CausalSemanticsWarning,
    CompilerError,
    InvalidInputError,
    ModelFileError,
    UnsupportedProgramError,
    ValueInferenceError,
)
from compiler.passes.validate import validate

__all__ = [
    "ApplyResult",
    "COMPILER_BOS",
    "COMPILER_PAD",
    "CausalSemanticsWarning",
    "CompiledModel",
    "CompilerError",
    "InvalidInputError",
    "LabelledResidual",
    "ModelFileError",
    "UnsupportedProgramError",
    "ValueInferenceError",
    "compile_rasp",
    "compile_rasp_to_model",
    "validate",
]

"""`compile_rasp`: from a RASP program to a jitted Haiku transformer.

One call per pass (each a function over plain data, see docs/compiling.md): expand primitives
and discretise -> trace -> infer values -> fuse elementwise ops -> validate -> optimise -> lower to
Craft blocks -> allocate sub-layers -> lay out the residual stream -> embeddings, assemble weights
and build the Haiku model.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

from compiler.compile_inputs import check_arguments, check_limit, check_norm, normalised_residual, output_encoder_of
from compiler.compiling_loops import compile_loop
from compiler.errors import InvalidInputError, UnsupportedProgramError
from compiler.model.compiled_model import CompiledModel
from compiler.model.encoders import InputEncoder
from compiler.model.from_craft import model_from_craft
from compiler.model.reuse import first_owners
from compiler.passes import nodes
from compiler.passes.allocate import Allocator, longest_path, place_blocks
from compiler.passes.discretise import discretise_numerical_inputs
from compiler.passes.fuse import fuse_elementwise
from compiler.passes.joint_selectors import join_selectors
from compiler.passes.layout import lay_out
from compiler.passes.lower import LoweringOptions, lower
from compiler.passes.norm_budget import residual_budget
from compiler.passes.optimize import FACTOR_QK, NARROW_LOOKUPS, optimize_graph, optimize_program, record, selected_passes
from compiler.passes.outputs import Outputs, as_root
from compiler.passes.readout import trace_values
from compiler.passes.size_estimate import DEFAULT_MAX_WEIGHT_BYTES, check_size, estimate_weight_bytes
from compiler.passes.sums import expand_sums
from compiler.passes.validate import check_graph, warn_causal_semantics
from craft.bases import bos_direction
from craft.blocks import SeriesWithResiduals
from craft.chamber.numerical_mlp import MIN_SHARPNESS
from rasp import rasp

# Tracr's special token names, the defaults of `compile_rasp_to_model`.
COMPILER_BOS = "compiler_bos"
COMPILER_PAD = "compiler_pad"


def _root(program: rasp.SOp | Sequence[rasp.SOp]) -> rasp.SOp | Outputs:
    """The expression the passes start from: the program, or an `Outputs` tying several.
    Anything else passes through as it is (`as_root`), for the checks to refuse by name."""
    if isinstance(program, rasp.RASPExpr) or not isinstance(program, (list, tuple)):
        return as_root(program)
    if not program:
        raise InvalidInputError("compile_rasp got an empty list of programs; pass at least one s-op")
    for i, output in enumerate(program):
        if not isinstance(output, rasp.SOp):
            raise InvalidInputError(
                f"program {i} of the list is a {type(output).__name__} ({output!r}), not an s-op; "
                "list only s-ops such as Aggregate(...) or Map(...)"
            )
    return Outputs(tuple(program))


def compile_rasp(
    program: rasp.SOp | Sequence[rasp.SOp],
    vocab: Iterable[Hashable],
    max_seq_len: int,
    causal: bool = False,
    compiler_bos: Hashable = "BOS",
    compiler_pad: Hashable = "PAD",
    mlp_exactness: float = 100,
    allocator: Allocator = longest_path,
    causal_strict: bool = False,
    optimize: bool | Iterable[str] = True,
    max_weight_bytes: int | None = DEFAULT_MAX_WEIGHT_BYTES,
    reuse_residual: bool = False,
    norm: str | None = None,
) -> CompiledModel:
    """Compile `program` into a transformer exact on every input of up to `max_seq_len` tokens.

    The model's decoded output equals `rasp.evaluate(program, tokens)` (with `causal=True`:
    `rasp.evaluate(program, tokens, causal=True)`) on every input of 1 to `max_seq_len` tokens
    drawn from `vocab`; numerical outputs within `CompiledModel.numerical_error_bound`.

    Several programs compile side by side into one model when `program` is a list or tuple of
    s-ops: one residual stream, their shared sub-expressions computed once, one output per
    program. `ModelOutput.output` then holds each program's logits (or value) in consecutive
    columns, `CompiledModel.output_columns` says which, and `apply(...).decoded` is
    `{output label: decoded sequence}` (labels made unique as in the residual labels).

    Args:
      program: the output s-op (everything it reads is compiled with it), or a list of them.
      vocab: the input tokens (hashable, not None; strings, numbers, ...).
      max_seq_len: the longest input, without BOS (the model has `max_seq_len + 1` positions).
      causal: mask attention to earlier positions (a decoder). When a selector may select later
        positions, so that the causal evaluation can differ from the plain one, a
        `CausalSemanticsWarning` names it.
      compiler_bos: the token at position 0 of every input (not in `vocab`).
      compiler_pad: the padding token of batched inputs (not in `vocab`, not `compiler_bos`).
      mlp_exactness: the sharpness of the ramps of discretising numerical MLPs (>= 4); larger is
        sharper, capped where float32 stays exact.
      allocator: places each s-op's block on a sub-layer: `compiler.passes.allocate.longest_path`
        (default, each block right after its inputs) or `milp_schedule` (an exact MILP that
        minimises the layer count), or any function with the same signature.
      causal_strict: with `causal=True`, refuse programs whose selectors the causal mask can
        change instead of warning.
      optimize: the optimisation passes (`compiler.passes.optimize`): True runs all of them,
        False none (Tracr's literal one-block-per-s-op layout), or an iterable of pass names.
      max_weight_bytes: refuse, before building any weight matrix, a compile whose weight
        matrices are estimated (`compiler.passes.size_estimate`) to take more than this many
        bytes while compiling (default 1 GiB); a quarter of it or more gives a
        `ModelSizeWarning`. None disables the check.
      reuse_residual: opt-in residual reuse (`compiler.model.reuse`): a value written after
        another's last read takes its residual slot, which an MLP clears first (two ReLU units
        per slot). Outputs are unchanged; the stream is narrower, but a slot then has several
        owners (`CompiledModel.residual_reuse`), so tools that read one s-op direction per
        residual coordinate (circuit and feature ground truth) see only the first owner.
      norm: None (no normalisation, as Tracr), "layernorm" or "rmsnorm": a pre-norm before
        every attention and MLP sub-layer and before the unembedding, as standard
        transformers have (`compiler.model.norm`). The compiler adds an anchor coordinate (three
        for LayerNorm: anchor, counter, balance) that keeps every norm's divisor within
        `config.norm.spread` of its gain, so the decoded outputs equal RASP's as without a norm.

    A `rasp.Loop` compiles to one block of layers that every iteration runs with the same
    weights (`compiler.compiling_loops`; `config.tied` records the block).

    Returns:
      The `CompiledModel`: Haiku params and a pure, jittable forward, the config with the
      residual labels, the graph, the Craft blocks, the input and output encoders.

    Raises:
      InvalidInputError: a bad argument (empty or string vocab, a special token in the vocab,
        `max_seq_len < 1`, `mlp_exactness < 4`, an unknown pass name).
      UnsupportedProgramError: the program cannot be compiled exactly; lists every reason.
      ValueInferenceError: a value set cannot be computed, or a function or predicate of the
        program raised on a value its inputs can take.
      ModelSizeError: the estimated weights exceed `max_weight_bytes`.
    """
    check_norm(norm, reuse_residual)
    if isinstance(program, rasp.Loop):  # iterations share one block of layers
        if reuse_residual:
            raise InvalidInputError(
                "reuse_residual=True is not supported for a rasp.Loop (its iterations share one block "
                "of layers, so a residual slot cannot change owner between them); compile it without"
            )
        return compile_loop(
            program, vocab, max_seq_len, causal=causal, compiler_bos=compiler_bos, compiler_pad=compiler_pad,
            mlp_exactness=mlp_exactness, allocator=allocator, causal_strict=causal_strict, optimize=optimize,
            max_weight_bytes=max_weight_bytes, norm=norm,
        )
    tokens = check_arguments(vocab, max_seq_len, compiler_bos, compiler_pad)
    check_limit(max_weight_bytes)
    passes = selected_passes(optimize)
    if not isinstance(mlp_exactness, (int, float)) or not mlp_exactness >= MIN_SHARPNESS:
        raise InvalidInputError(
            f"mlp_exactness must be a number >= {MIN_SHARPNESS:g} (the sharpness of numerical "
            f"MLP ramps), got {mlp_exactness!r}"
        )
    bos = bos_direction(compiler_bos)
    merged, merges = optimize_program(_root(program), passes)
    traced = trace_values(expand_sums(discretise_numerical_inputs(join_selectors(merged)), max_seq_len), tokens, max_seq_len)
    record(traced, merges)
    fused = fuse_elementwise(traced)
    problems = check_graph(traced, fused, causal, bos, causal_strict=causal_strict, passes=passes)
    if problems:
        raise UnsupportedProgramError(problems)
    warn_causal_semantics(traced)
    graph = optimize_graph(fused, passes)
    check_size(estimate_weight_bytes(graph, len(tokens), max_seq_len, saturated=norm is not None), max_weight_bytes)
    options = LoweringOptions(
        max_seq_len=max_seq_len, causal=causal, bos=bos, mlp_exactness=float(mlp_exactness),
        narrow_lookups=NARROW_LOOKUPS in passes, saturate=norm is not None,
    )
    lower(graph, options)
    sublayers = place_blocks(graph, allocator)
    encoder = InputEncoder(tokens, compiler_bos, compiler_pad, max_seq_len)
    craft = lay_out(
        graph, sublayers, encoder.token_to_id, compiler_bos, compiler_pad, max_seq_len=max_seq_len, causal=causal
    )
    budget = residual_budget(graph, craft.residual) if norm is not None else 0.0
    haiku = model_from_craft(craft, sparse_qk=FACTOR_QK in passes, reuse_residual=reuse_residual, norm=norm,
                             norm_budget=budget)
    output_encoder = output_encoder_of(graph, isinstance(program, (list, tuple)), compiler_bos)
    craft_model = SeriesWithResiduals(tuple(b for b in sublayers if b is not None))
    map_errors = {
        label: (data[nodes.NUMERICAL_FIT].construction, data[nodes.NUMERICAL_FIT].error)
        for label, data in graph.nodes(data=True)
        if nodes.NUMERICAL_FIT in data
    }
    return CompiledModel(
        numerical_error_bound=max((error for _, error in map_errors.values()), default=0.0),
        numerical_map_errors=map_errors,
        params=haiku.params,
        config=haiku.config,
        forward=haiku.forward,
        graph=graph,
        craft_model=craft_model,
        sublayers=tuple(sublayers),
        residual_space=(normalised_residual(craft.residual, norm) if haiku.reuse is None
                        else first_owners(craft.residual, haiku.reuse)),
        residual_reuse=haiku.reuse,
        input_encoder=encoder,
        output_encoder=output_encoder,
        program=program,
    )


def compile_rasp_to_model(
    program: rasp.SOp,
    vocab: Iterable[Hashable],
    max_seq_len: int,
    causal: bool = False,
    compiler_bos: Hashable = COMPILER_BOS,
    compiler_pad: Hashable = COMPILER_PAD,
    mlp_exactness: int = 100,
    causal_strict: bool = False,
    optimize: bool | Iterable[str] = True,
    max_weight_bytes: int | None = DEFAULT_MAX_WEIGHT_BYTES,
) -> CompiledModel:
    """Tracr's entry point, with its argument names and default special tokens."""
    return compile_rasp(
        program,
        vocab,
        max_seq_len,
        causal=causal,
        compiler_bos=compiler_bos,
        compiler_pad=compiler_pad,
        mlp_exactness=mlp_exactness,
        causal_strict=causal_strict,
        optimize=optimize,
        max_weight_bytes=max_weight_bytes,
    )


__all__: Sequence[str] = (
    "COMPILER_BOS",
    "COMPILER_PAD",
    "compile_rasp",
    "compile_rasp_to_model",
)

"""`compile_loop`: a `rasp.Loop` compiled to a transformer whose loop layers share weights.

`compile_rasp(loop, ...)` lands here. The passes are `compile_rasp`'s, with three changes
(`compiler.passes.loops`): the loop is first rewritten into a plain program over its state, the
state's values are inferred as a fixed point of the body, and allocation puts the body in a
block of whole layers ending in the commit MLP; the model config records that block as tied
(`ModelConfig.tied`), so the forward pass runs it `steps` times with one copy of its weights.
The graph optimisation passes (`fold_maps`, `fold_outputs`, `fuse_inputs`, `prune_*`) do not
run: they move work between nodes, which could cross the loop's boundary; the program pass
`merge_common` and the assembly pass `factor_qk` run as selected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable

from compiler.compile_inputs import check_arguments, check_limit, check_norm, normalised_residual, output_encoder_of
from compiler.errors import InvalidInputError, UnsupportedProgramError
from compiler.model.compiled_model import CompiledModel
from compiler.model.config import TiedBlock
from compiler.model.encoders import InputEncoder
from compiler.model.from_craft import model_from_craft
from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.allocate import Allocator, longest_path
from compiler.passes.discretise import discretise_numerical_inputs
from compiler.passes.fuse import fuse_elementwise
from compiler.passes.joint_selectors import join_selectors
from compiler.passes.layout import lay_out
from compiler.passes.loops import LoopProgram, loop_program, loop_values, place_loop
from compiler.passes.lower import LoweringOptions, lower, output_space
from compiler.passes.norm_budget import residual_budget
from compiler.passes.optimize import FACTOR_QK, optimize_program, record, selected_passes
from compiler.passes.size_estimate import DEFAULT_MAX_WEIGHT_BYTES, check_size, estimate_weight_bytes
from compiler.passes.sums import expand_sums
from compiler.passes.validate import check_graph, warn_causal_semantics
from craft.bases import bos_direction
from craft.blocks import SeriesWithResiduals
from craft.chamber.numerical_mlp import MIN_SHARPNESS
from rasp import rasp

LOOP = nodes.LOOP  # the graph attribute holding the `LoopRecord`


@dataclasses.dataclass(frozen=True)
class LoopRecord:
    """What the compile of a loop decided, kept on the graph (`graph.graph[LOOP]`)."""

    state: str  # the state's label (the loop's)
    next_state: str  # the body's result
    steps: int
    value_count: int  # values of the state
    rounds: int  # fixed-point rounds of value inference
    closed: bool  # the value set closed before the `steps` cap
    fused_commit: bool  # the commit shares the next state's MLP sub-layer


def compile_loop(
    loop: rasp.Loop,
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
    norm: str | None = None,
) -> CompiledModel:
    """Compile `loop` so that its iterations run one block of layers with shared weights.

    Arguments, result and errors as `compile_rasp`'s. The model's decoded output equals
    `rasp.evaluate(loop, tokens, causal=causal)` on every input; `config.tied` says which
    sub-layers repeat and how often; `graph.graph[LOOP]` holds a `LoopRecord`.

    Raises (besides `compile_rasp`'s):
      UnsupportedProgramError: a nested loop, a body reading another loop's state, a numerical
        state that can be None.
      ValueInferenceError: the state's values do not close under the body and exceed the size
        limit within `steps` iterations.
    """
    tokens = check_arguments(vocab, max_seq_len, compiler_bos, compiler_pad)
    check_limit(max_weight_bytes)
    check_norm(norm)
    passes = selected_passes(optimize)
    if not isinstance(mlp_exactness, (int, float)) or not mlp_exactness >= MIN_SHARPNESS:
        raise InvalidInputError(
            f"mlp_exactness must be a number >= {MIN_SHARPNESS:g} (the sharpness of numerical "
            f"MLP ramps), got {mlp_exactness!r}"
        )
    bos = bos_direction(compiler_bos)
    plain = loop_program(loop)
    merged, merges = optimize_program(plain.program, passes)
    rewritten = expand_sums(discretise_numerical_inputs(join_selectors(merged)), max_seq_len)
    traced = g.trace(rewritten)
    state, next_state = traced.graph[nodes.SINKS]  # the labels after relabelling
    program = LoopProgram(plain.program, state, next_state, loop.steps)
    values = loop_values(traced, program, tokens, max_seq_len)
    record(traced, merges)
    graph = fuse_elementwise(traced)
    problems = check_graph(traced, graph, causal, bos, causal_strict=causal_strict, passes=())
    if problems:
        raise UnsupportedProgramError(problems)
    warn_causal_semantics(traced)
    check_size(estimate_weight_bytes(graph, len(tokens), max_seq_len, saturated=norm is not None), max_weight_bytes)
    options = LoweringOptions(max_seq_len=max_seq_len, causal=causal, bos=bos, mlp_exactness=float(mlp_exactness),
                              saturate=norm is not None)
    lower(graph, options)
    layout = place_loop(graph, program, allocator)
    graph.graph[LOOP] = LoopRecord(
        program.state, program.next_state, loop.steps, len(values.value_set), values.rounds, values.closed,
        layout.fused_commit,
    )
    encoder = InputEncoder(tokens, compiler_bos, compiler_pad, max_seq_len)
    craft = lay_out(
        graph, list(layout.sublayers), encoder.token_to_id, compiler_bos, compiler_pad,
        max_seq_len=max_seq_len, causal=causal,
    )
    craft = dataclasses.replace(
        craft,
        output_space=output_space(graph, program.state),
        numerical_output=g.is_numerical(graph, program.state),
    )
    tied = TiedBlock(layout.start, layout.stop, loop.steps)
    budget = residual_budget(graph, craft.residual) if norm is not None else 0.0
    haiku = model_from_craft(craft, sparse_qk=FACTOR_QK in passes, tied=tied, norm=norm, norm_budget=budget)
    graph.graph[nodes.SINKS] = (program.state,)  # the output is the state after the last iteration
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
        craft_model=SeriesWithResiduals(tuple(b for b in layout.sublayers if b is not None)),
        sublayers=layout.sublayers,
        residual_space=normalised_residual(craft.residual, norm),
        input_encoder=encoder,
        output_encoder=output_encoder_of(graph, False, compiler_bos),
        program=loop,
    )


__all__ = ["LOOP", "LoopRecord", "compile_loop"]

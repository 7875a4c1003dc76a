"""What both compiles (plain and loop, `compiler.compiling` and `compiler.compiling_loops`) check
of their arguments before any pass runs, and the output decoders both attach to the model."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import networkx as nx
import numpy as np

from compiler.errors import InvalidInputError
from compiler.model.config import NORMS
from compiler.model.encoders import OutputEncoder, OutputsEncoder
from compiler.model.norm import norm_labels
from compiler.passes import graph as g
from compiler.passes import nodes
from compiler.passes.lower import output_space
from craft.bases import BasisDirection, VectorSpaceWithBasis, value_sort_key


def check_arguments(vocab: Iterable[Any], max_seq_len: int, bos: Any, pad: Any) -> tuple:
    """The vocabulary as a sorted tuple of distinct tokens, after checking it, `max_seq_len` and
    the BOS / PAD tokens.

    Raises:
      InvalidInputError: naming the bad argument and what to pass instead.
    """
    if isinstance(vocab, (str, bytes)):
        raise InvalidInputError(
            f"vocab must be a collection of tokens, got the string {vocab!r}; pass e.g. set({vocab!r})"
        )
    try:
        distinct = set(vocab)
    except TypeError as error:
        raise InvalidInputError(f"vocab holds an unhashable token: {error}") from error
    if None in distinct:
        raise InvalidInputError(
            "vocab holds None, which RASP reserves for 'no value' (the evaluator skips it in "
            "Maps and never selects it); use another token, e.g. the string 'None'"
        )
    for name, special in (("compiler_bos", bos), ("compiler_pad", pad)):
        if special is None:
            raise InvalidInputError(
                f"{name} is None, which RASP reserves for 'no value'; use a string such as 'BOS' / 'PAD'"
            )
    try:  # plain order where it equals value_sort_key's (all strings): 100,000 tokens in ms
        homogeneous = all(type(token) is str for token in distinct)
        tokens = tuple(sorted(distinct) if homogeneous else sorted(distinct, key=value_sort_key))
    except TypeError as error:
        raise InvalidInputError(f"vocab holds an unhashable token: {error}") from error
    if not tokens:
        raise InvalidInputError("vocab is empty; pass the set of input tokens")
    if isinstance(max_seq_len, bool) or not isinstance(max_seq_len, (int, np.integer)) or max_seq_len < 1:
        raise InvalidInputError(f"max_seq_len must be a positive integer, got {max_seq_len!r}")
    if bos == pad:
        raise InvalidInputError(f"compiler_bos and compiler_pad must differ, both are {bos!r}")
    for name, special in (("compiler_bos", bos), ("compiler_pad", pad)):
        if special in tokens:
            raise InvalidInputError(
                f"{name}={special!r} is also a vocabulary token; choose a {name} outside the vocab"
            )
    return tokens


def check_norm(norm: Any, reuse_residual: bool = False) -> None:
    """Refuses (`InvalidInputError`) a `norm` that is not None or one of `NORMS`, and a norm
    together with `reuse_residual` (the norm coordinates would need owners among reused slots)."""
    if norm is not None and norm not in NORMS:
        raise InvalidInputError(f"norm must be None or one of {NORMS}, got {norm!r}")
    if norm is not None and reuse_residual:
        raise InvalidInputError("norm and reuse_residual=True cannot be combined yet; compile with one of them")


def normalised_residual(residual: VectorSpaceWithBasis, norm: str | None) -> VectorSpaceWithBasis:
    """The residual space of the compiled model: the laid-out one, with the norm's coordinates
    (`compiler.model.norm.norm_labels`) after it when there is a norm."""
    if norm is None:
        return residual
    return VectorSpaceWithBasis((*residual.basis, *(BasisDirection(label) for label in norm_labels(norm))))


def check_limit(max_weight_bytes: int | None) -> None:
    """Refuses (`InvalidInputError`) a weight limit that is not a positive integer or None."""
    if max_weight_bytes is None:
        return
    if isinstance(max_weight_bytes, bool) or not isinstance(max_weight_bytes, (int, np.integer)) or max_weight_bytes < 1:
        raise InvalidInputError(
            f"max_weight_bytes must be a positive number of bytes or None (no limit), got {max_weight_bytes!r}"
        )


def output_encoder_of(graph: nx.DiGraph, multiple: bool, bos: Hashable) -> OutputEncoder | OutputsEncoder:
    """Decodes each output s-op: one encoder, or one per program when several were compiled."""
    encoders = tuple(
        OutputEncoder(
            values=None if g.is_numerical(graph, sink) else tuple(d.value for d in output_space(graph, sink).basis),
            bos=bos,
        )
        for sink in graph.graph[nodes.SINKS]
    )
    if not multiple:
        return encoders[0]
    return OutputsEncoder(labels=tuple(graph.graph[nodes.SINKS]), encoders=encoders, bos=bos)

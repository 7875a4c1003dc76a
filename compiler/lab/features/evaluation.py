"""Decoded-output accuracy of a (compressed, or spliced) multi-output model against RASP.

References are the RASP evaluator's outputs on the sampled inputs (computed once per input set,
as :class:`References`); a model's output (logits ``[batch, T, n]``) is scored per program as
the model's decoder reads it (``compiler.model.encoders``): within that program's columns the
argmax, or None when every logit is below ``EMPTY_THRESHOLD``; a numerical output by the nearest
reference value. An input counts as right when every program is right at every position,
positions where RASP's value is None included.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from tqdm import tqdm

import rasp
from compiler import CompiledModel
from compiler.errors import LabError


@dataclasses.dataclass(frozen=True, eq=False)
class References:
    """RASP's outputs on ``ids``: per program, value indices (categorical) or values, and a mask."""

    ids: np.ndarray  # [N, T]
    labels: tuple[str, ...]
    targets: tuple[np.ndarray, ...]  # per program [N, T]: value index (int) or value (float)
    masks: tuple[np.ndarray, ...]  # per program [N, T] bool: a real token whose value is not None
    numerical: tuple[bool, ...]
    nones: tuple[np.ndarray, ...] = ()  # per program [N, T] bool: a real token whose value is None


def _encoders(compiled: CompiledModel) -> tuple:
    return tuple(part.encoder for part in compiled.output_parts)


def rasp_references(compiled: CompiledModel, programs: Sequence[Any], ids: np.ndarray,
                    progress: bool = False) -> References:
    """Evaluate every program with ``rasp.evaluate`` on every row of ``ids``.

    Args:
        compiled: the model the references are for: its output columns give the labels, its
            output encoders the value indices, its input encoder the tokens of ``ids``.
        programs: the RASP programs, one per output of ``compiled``, in the order of
            ``compiled.output_columns`` (only their number is checked).
        ids: the inputs, ``[N, T]`` token ids (BOS first, PAD after each input's end).
        progress: show a progress bar over the inputs.

    Returns:
        The :class:`References`: per program, the expected value index (categorical) or value
        (numerical) at every position, and which positions are scored or expect None.

    Raises:
        LabError: the number of programs differs from the model's outputs.
    """
    labels = tuple(compiled.output_columns)
    if len(programs) != len(labels):
        raise LabError(f"{len(programs)} programs given; the model has {len(labels)} outputs ({labels[:3]}...)")
    encoders = _encoders(compiled)
    ids = np.asarray(ids)
    vocab = {i: t for t, i in compiled.input_encoder.token_to_id.items()}
    pad = compiled.config.pad_id
    targets = [np.zeros(ids.shape, np.float64 if e.numerical else np.int64) for e in encoders]
    masks = [np.zeros(ids.shape, bool) for _ in encoders]
    nones = [np.zeros(ids.shape, bool) for _ in encoders]
    index = [None if e.numerical else {v: j for j, v in enumerate(e.values)} for e in encoders]
    for r, row in enumerate(tqdm(ids, desc="RASP references", disable=not progress, mininterval=2)):
        tokens = [vocab[int(i)] for i in row[1:] if int(i) != pad]
        for p, program in enumerate(programs):
            for position, value in enumerate(rasp.evaluate(program, tokens), start=1):
                if value is None:
                    nones[p][r, position] = index[p] is not None  # a number has no None to decode
                    continue
                # a value without a logit (index -1) is never decoded right
                lookup = index[p]
                targets[p][r, position] = value if lookup is None else lookup.get(value, -1)
                masks[p][r, position] = True
    return References(ids, labels, tuple(targets), tuple(masks), tuple(e.numerical for e in encoders), tuple(nones))


@dataclasses.dataclass(frozen=True)
class OutputAccuracy:
    """Share of inputs right at every scored position of every program, and per program."""

    inputs: int
    sequence: float  # all programs right on the whole input
    per_program: dict[str, float]  # per program: inputs right at every scored position

    @property
    def exact(self) -> bool:
        return self.sequence == 1.0


def accuracy_of(compiled: CompiledModel, refs: References, run: Callable[[np.ndarray], Any],
                batch_inputs: int = 500) -> OutputAccuracy:
    """Score ``run(ids)``, a model output ``[n, T, outputs]`` (or ``[n, T]`` for one numerical
    program), on ``refs``, ``batch_inputs`` rows at a time, so the whole output never exists at
    once: the 16k-copy model's logits for 10,000 inputs of 65 positions would be 42 GB.

    Args:
        compiled: the compiled model whose output columns and decoders read the output.
        refs: RASP's outputs on the inputs (:func:`rasp_references`); ``refs.ids`` are the rows
            ``run`` is given.
        run: the model under test, from ``[n, T]`` ids to its output (the compressed model, a
            spliced forward pass, ...).
        batch_inputs: rows of ``refs.ids`` per call of ``run``.

    Returns:
        The :class:`OutputAccuracy`: the number of inputs, the share right at every scored
        position of every program, and the share per program.

    Raises:
        LabError: ``batch_inputs`` is below 1.
    """
    if batch_inputs < 1:
        raise LabError(f"accuracy_of: batch_inputs must be positive, got {batch_inputs}")
    parts = [_right(compiled, refs, np.asarray(run(refs.ids[s:s + batch_inputs])), slice(s, s + batch_inputs))
             for s in range(0, len(refs.ids), batch_inputs)]
    return _summary(refs, {label: np.concatenate([part[label] for part in parts]) for label in refs.labels})


def _right(compiled: CompiledModel, refs: References, output: np.ndarray, rows: slice) -> dict[str, np.ndarray]:
    """Per program, whether each input of ``refs.ids[rows]`` is right at every scored position."""
    output = np.asarray(output)
    if output.ndim == 2:
        output = output[..., None]
    encoders = _encoders(compiled)
    right_inputs = {}
    for p, (label, columns) in enumerate(compiled.output_columns.items()):
        block = output[..., columns]
        targets, masks = refs.targets[p][rows], refs.masks[p][rows]
        if refs.numerical[p]:
            values = np.unique(refs.targets[p][refs.masks[p]])
            gap = np.min(np.diff(values)) / 2 if len(values) > 1 else 0.5
            right = np.abs(block[..., 0] - targets) < gap
        else:
            index = encoders[p].value_indices(block)  # the model's decoder: argmax, -1 for None
            shown = index >= 0
            right = shown & (index == targets)
            if refs.nones:
                nones = refs.nones[p][rows]
                right = np.where(nones, ~shown, right)
                masks = masks | nones
        right_inputs[label] = np.all(right | ~masks, axis=1)
    return right_inputs


def _summary(refs: References, right_inputs: dict[str, np.ndarray]) -> OutputAccuracy:
    every = np.all(np.stack([right_inputs[label] for label in refs.labels]), axis=0)
    return OutputAccuracy(len(refs.ids), float(every.mean()),
                          {label: float(right_inputs[label].mean()) for label in refs.labels})

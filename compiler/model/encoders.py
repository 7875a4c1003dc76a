"""Token <-> id encoding of model inputs and decoding of model outputs."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from compiler.errors import InvalidInputError

# A categorical output position whose largest one-hot entry is below this decodes as None: the
# compiled model writes exactly 0 or 1 there, so this only separates "empty" from "set".
EMPTY_THRESHOLD = 0.5


@dataclasses.dataclass(frozen=True)
class InputEncoder:
    """Vocabulary tokens get ids 0..n-1 in sorted order, then BOS, then PAD."""

    vocab: tuple[Hashable, ...]
    bos: Hashable
    pad: Hashable
    max_seq_len: int

    @property
    def token_to_id(self) -> dict[Hashable, int]:
        mapping = {token: i for i, token in enumerate(self.vocab)}
        mapping[self.bos] = len(self.vocab)
        mapping[self.pad] = len(self.vocab) + 1
        return mapping

    @property
    def bos_id(self) -> int:
        return len(self.vocab)

    @property
    def pad_id(self) -> int:
        return len(self.vocab) + 1

    @property
    def vocab_size(self) -> int:
        return len(self.vocab) + 2

    def encode(self, tokens: Sequence[Hashable]) -> list[int]:
        """Ids of one sequence that starts with BOS; raises `InvalidInputError` on bad input."""
        if isinstance(tokens, (str, bytes)):
            raise InvalidInputError(
                f"the input must be a list of tokens starting with BOS, got the string {tokens!r}; "
                f"split it first, e.g. {tokens!r}.split() gives {str(tokens).split()!r}"
                if isinstance(tokens, str)
                else f"the input must be a list of tokens starting with BOS, got bytes {tokens!r}"
            )
        try:
            tokens = list(tokens)
        except TypeError:
            raise InvalidInputError(
                f"the input must be a list of tokens starting with BOS, got {type(tokens).__name__} {tokens!r}"
            ) from None
        if not tokens or tokens[0] != self.bos:
            shown = tokens[0] if tokens else "nothing"
            raise InvalidInputError(
                f"the input must start with the BOS token {self.bos!r}, but starts with {shown!r}"
            )
        if len(tokens) - 1 > self.max_seq_len:
            raise InvalidInputError(
                f"the input has {len(tokens) - 1} tokens after BOS, more than max_seq_len="
                f"{self.max_seq_len} the model was compiled for"
            )
        mapping = self.token_to_id
        ids = []
        padding = False
        for position, token in enumerate(tokens):
            try:
                ids.append(mapping[token])
            except (KeyError, TypeError):
                raise InvalidInputError(
                    f"token {token!r} at position {position} is not in the vocabulary "
                    f"{list(self.vocab)!r}"
                ) from None
            if position > 0 and token == self.bos:
                raise InvalidInputError(f"BOS token {self.bos!r} appears again at position {position}")
            if token == self.pad:
                padding = True
            elif padding:
                raise InvalidInputError(
                    f"token {token!r} at position {position} follows padding; PAD may only end a sequence"
                )
        return ids

    def encode_batch(self, batch: Sequence[Sequence[Hashable]]) -> np.ndarray:
        """Encode sequences of different lengths into one `[batch, T]` array padded with PAD.

        Raises `InvalidInputError` for a string (one sequence, not a batch) or an empty batch
        (no width to pad to; `CompiledModel.apply_batch([])` answers `[]` without encoding).
        """
        if isinstance(batch, (str, bytes)):
            raise InvalidInputError(
                f"a batch must be a list of token lists, got the string {batch!r}; pass e.g. "
                f"[{str(batch).split()!r}]"
            )
        batch = list(batch)
        if batch and not isinstance(batch[0], (list, tuple, np.ndarray)) and batch[0] == self.bos:
            raise InvalidInputError(
                f"a batch must be a list of token lists, got one sequence starting with BOS "
                f"{self.bos!r}; wrap it: [{batch!r}]"
            )
        encoded = [self.encode(tokens) for tokens in batch]
        if not encoded:
            raise InvalidInputError("the batch is empty: there is no sequence to encode; pass at least one")
        width = max(len(ids) for ids in encoded)
        out = np.full((len(encoded), width), self.pad_id, dtype=np.int32)
        for row, ids in enumerate(encoded):
            out[row, : len(ids)] = ids
        return out


@dataclasses.dataclass(frozen=True)
class OutputEncoder:
    """Decodes output logits to values (categorical) or passes numbers through (numerical)."""

    values: tuple[Any, ...] | None  # None for a numerical output
    bos: Hashable

    @property
    def numerical(self) -> bool:
        return self.values is None

    def decode(self, output: np.ndarray) -> list[Any]:
        """Decode one sequence's output (`[T, n]` logits or `[T]` values); position 0 is BOS."""
        output = np.asarray(output)
        if self.numerical:
            decoded: list[Any] = [float(v) for v in output]
        else:
            assert self.values is not None
            values = self.values
            decoded = [None if i < 0 else values[i] for i in self.value_indices(output).tolist()]
        decoded[0] = self.bos
        return decoded

    def value_indices(self, output: np.ndarray) -> np.ndarray:
        """``[...]``: the index into ``values`` each position of categorical logits ``[..., n]``
        decodes to (the argmax), or -1 for None (no logit reaches :data:`EMPTY_THRESHOLD`)."""
        output = np.asarray(output)
        if not self.values:
            # An output s-op that is None at every position has an empty one-hot space (logits
            # of width 0, where argmax fails); every position decodes as None.
            return np.full(output.shape[:-1], -1, np.int64)
        return np.where(output.max(axis=-1) >= EMPTY_THRESHOLD, output.argmax(axis=-1), -1)

    @property
    def width(self) -> int:
        """The output columns this encoder reads: one for a number, one per categorical value."""
        return 1 if self.values is None else len(self.values)


@dataclasses.dataclass(frozen=True)
class OutputsEncoder:
    """Decodes the outputs of several programs compiled into one model (`compile_rasp([...])`).

    The model's output is `[T, n]`: each program's columns one after the other, in program
    order (a numerical output takes one column). `decode` returns `{label: decoded sequence}`.
    """

    labels: tuple[str, ...]
    encoders: tuple[OutputEncoder, ...]
    bos: Hashable

    numerical = False

    @property
    def columns(self) -> dict[str, slice]:
        """Each output's columns in the model's output."""
        found, start = {}, 0
        for label, encoder in zip(self.labels, self.encoders):
            found[label] = slice(start, start + encoder.width)
            start += encoder.width
        return found

    @property
    def width(self) -> int:
        return sum(encoder.width for encoder in self.encoders)

    def decode(self, output: np.ndarray) -> dict[str, list[Any]]:
        """Decode one sequence's `[T, n]` output into each program's decoded sequence."""
        output = np.asarray(output)
        if output.ndim == 1:  # a single numerical output, `[T]`
            output = output[:, None]
        decoded = {}
        for (label, columns), encoder in zip(self.columns.items(), self.encoders):
            part = output[:, columns]
            decoded[label] = encoder.decode(part[:, 0] if encoder.numerical else part)
        return decoded


@dataclasses.dataclass(frozen=True)
class OutputPart:
    """One program's output in a model: its label, its columns of `ModelOutput.output` and its
    encoder."""

    label: str
    columns: slice
    encoder: OutputEncoder

    @property
    def numerical(self) -> bool:
        return self.encoder.numerical


def output_parts(encoder: OutputEncoder | OutputsEncoder, label: str = "output") -> tuple[OutputPart, ...]:
    """Every program's output part, in column order: one for a single program (named `label`),
    one per program compiled together. Code that reads outputs iterates over these instead of
    telling one output from several."""
    if isinstance(encoder, OutputsEncoder):
        return tuple(OutputPart(name, columns, part)
                     for (name, columns), part in zip(encoder.columns.items(), encoder.encoders))
    return (OutputPart(label, slice(0, encoder.width), encoder),)

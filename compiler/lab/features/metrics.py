"""Scores of a dictionary method against the true dictionary.

**SynthSAEBench's metrics, same definitions** (as SAELens implements them in
``sae_lens.synthetic.evals``), computed here in numpy so they run without torch:

* ``true_l0`` / ``sae_l0``: mean number of non-zero true codes / SAE latents per activation;
* ``dead_latents``: latents that never fire (``!= 0``) on the evaluated activations;
* ``shrinkage``: mean ``|x̂| / |x|`` over activations with ``|x| > 1e-6``;
* ``explained_variance``: ``1 - E|x - x̂|² / (E|x|² - |E x|²)``;
* ``mcc``: Hungarian matching of decoder rows to true vectors on ``|cos|``, mean matched ``|cos|``;
* ``uniqueness``: distinct best-matching true vectors over latents (argmax of ``|cos|``), / latents;
* ``classification``: each latent as a detector of its best-matching true feature (latent
  ``!= 0`` against code ``> 0``): mean precision, recall, F1 and accuracy over latents
  (0 where undefined).

The ground truth at a site is its sparse features that occur in the data plus the dense directions
that vary over real positions (positions, numerical s-ops, attention internals); constant ones
(``one``, the BOS and PAD markers, which are 0 at real positions) are a bias (:func:`ground_truth`).

**Identifiability**: :func:`cofiring` groups true directions that are always on together in the
data; each group's summed vector is an equally exact, sparser dictionary (see :class:`Cofiring`).

**What only a compiled model allows** (:mod:`compiler.lab.features.splice`): the decoded-output
accuracy against RASP with the reconstruction spliced into the stream, and how many true features
have a latent that is matched and causally used downstream.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Protocol

import numpy as np
from scipy.optimize import linear_sum_assignment

from compiler.errors import LabError
from compiler.lab.features.dictionary import TrueDictionary
from craft.bases import ONE_NAME

MATCH_COSINE = 0.9  # a latent "matches" its Hungarian partner at |cos| >= this
MIN_INPUT_NORM = 1e-6  # SynthSAEBench's shrinkage skips smaller inputs


class SparseCoder(Protocol):
    """What a dictionary method exposes to be scored: an encoder, a decoder and its rows."""

    @property
    def decoder(self) -> np.ndarray:  # [latents, d]
        ...

    def encode(self, x: np.ndarray) -> np.ndarray:  # [n, d] -> [n, latents]
        ...

    def decode(self, z: np.ndarray) -> np.ndarray:  # [n, latents] -> [n, d]
        ...


@dataclasses.dataclass(frozen=True)
class GroundTruth:
    """The true directions at a site: sparse features first, then the varying dense ones."""

    labels: tuple[str, ...]
    vectors: np.ndarray  # [F + G', d]
    num_sparse: int
    bias: np.ndarray  # [d]: the constant dense part (``one``)
    sparse_columns: np.ndarray  # which of the dictionary's features are in ``vectors``
    dense_columns: np.ndarray  # which of the dictionary's dense directions are in ``vectors``

    def codes(self, sparse_codes: np.ndarray, dense_codes: np.ndarray) -> np.ndarray:
        """``[..., F' + G']`` true codes from the dictionary's feature codes ``[..., F]`` (e.g. a
        shard's, densified) and dense codes ``[..., G]``."""
        return np.concatenate([sparse_codes[..., self.sparse_columns], dense_codes[..., self.dense_columns]], axis=-1)


def ground_truth(dictionary: TrueDictionary, occurring: np.ndarray | None = None,
                 dense_range: tuple[np.ndarray, np.ndarray] | None = None) -> GroundTruth:
    """The true directions at a site, from its dictionary and (optionally) the data.

    Args:
        dictionary: the site's true dictionary.
        occurring: ``[F]`` bool (:func:`data_profile`): keep only features that are on somewhere.
            A value the program never produces (``same`` = 0: a count that includes its own
            position) is a basis direction, not a feature of the data.
        dense_range: ``(low, high)`` per dense direction over the data (:func:`data_profile`).
            Directions that vary are ground truth; constant ones (``one``; markers that are 0 at
            real positions) go into the bias. Without it, ``one`` is the bias and every other
            dense direction counts as varying.

    Returns:
        The :class:`GroundTruth`.
    """
    keep = np.arange(dictionary.num_features) if occurring is None else np.nonzero(np.asarray(occurring))[0]
    if dense_range is None:
        low = high = np.asarray([1.0 if label == ONE_NAME else 0.0 for label in dictionary.dense_labels])
        varying = np.asarray([label != ONE_NAME for label in dictionary.dense_labels], bool)
    else:
        low, high = (np.asarray(a, np.float64) for a in dense_range)
        varying = high - low > 1e-6
    bias = (np.where(varying, 0.0, low) @ dictionary.dense_vectors).astype(np.float32) if len(low) \
        else np.zeros(dictionary.width, np.float32)
    dense = np.nonzero(varying)[0]
    vectors = np.concatenate([dictionary.vectors[keep], dictionary.dense_vectors[dense]])
    labels = tuple(dictionary.labels[i] for i in keep) + tuple(dictionary.dense_labels[j] for j in dense)
    return GroundTruth(labels, np.asarray(vectors, np.float32), len(keep), bias, keep, dense)


def data_profile(batches: Iterable[dict[str, np.ndarray]], num_features: int
                 ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """``(occurring [F], (low [G], high [G]))`` over shard batches holding ``code_index`` and
    ``dense_codes``: which features are ever on, and each dense direction's range.

    Args:
        batches: shard batches (e.g. ``ShardReader.batches(n, keys=("code_index", "dense_codes"))``),
            each with ``code_index`` ``[n, k]`` (feature numbers, -1 pads) and ``dense_codes``
            ``[n, G]``; read once.
        num_features: ``F``, the number of features of the site's dictionary.

    Returns:
        ``(occurring, (low, high))``: ``[F]`` bool, whether each feature is on somewhere, and per
        dense direction its smallest and largest value (float64), as :func:`ground_truth` takes
        them.

    Raises:
        LabError: ``batches`` is empty.
    """
    seen = np.zeros(num_features, bool)
    low = high = None
    for batch in batches:
        index = np.asarray(batch["code_index"])
        seen[index[index >= 0]] = True
        dense = np.asarray(batch["dense_codes"], np.float64)
        low = dense.min(axis=0) if low is None else np.minimum(low, dense.min(axis=0))
        high = dense.max(axis=0) if high is None else np.maximum(high, dense.max(axis=0))
    if low is None or high is None:
        raise LabError("data_profile: no batches")
    return seen, (low, high)


@dataclasses.dataclass(frozen=True)
class JumpReluCoder:
    """A JumpReLU SAE in numpy: ``z = h * (h > threshold)`` with ``h = x @ w_enc + b_enc``;
    ``x̂ = z @ w_dec + b_dec``."""

    w_enc: np.ndarray  # [d, latents]
    b_enc: np.ndarray  # [latents]
    threshold: np.ndarray  # [latents]
    w_dec: np.ndarray  # [latents, d]
    b_dec: np.ndarray  # [d]

    @property
    def decoder(self) -> np.ndarray:
        return self.w_dec

    def encode(self, x: np.ndarray) -> np.ndarray:
        h = np.asarray(x, np.float32) @ self.w_enc + self.b_enc
        return np.where(h > self.threshold, h, 0.0).astype(np.float32)

    def decode(self, z: np.ndarray) -> np.ndarray:
        return np.asarray(z, np.float32) @ self.w_dec + self.b_dec


def perfect_coder(truth: GroundTruth, threshold: float | None = None) -> JumpReluCoder:
    """The SAE the true dictionary defines: latent i reads and writes true vector i.

    Latent i reads ``x · v_i / |v_i|²``: its code when the other features on are orthogonal to it
    (the exact model). In superposition an off feature also reads the overlaps of the features
    that are on, at most one value per s-op: ``m_i``, the sum over s-ops of the largest overlap
    ``v_i · v_j / |v_i|²`` with one of their values (0 when negative), is the most it can read
    while off. With ``threshold`` None each latent fires above ``(1 + m_i) / 2``, halfway to an on
    code of 1, which separates on from off whenever ``m_i < 1``; the packed projection keeps
    ``m_i`` below 0.5 at its full-margin width, and at the 16k-copy stage's width of 768 the
    copies' codes overlap up to 0.84. A number gives every sparse latent that threshold instead.
    Dense directions sit on their own axes (threshold 0).

    Args:
        truth: the true directions (:func:`ground_truth`): vectors, how many are sparse, and the
            constant bias.
        threshold: one firing threshold for every sparse latent; None for each latent's own
            ``(1 + m_i) / 2``.

    Returns:
        A :class:`JumpReluCoder` with one latent per true direction (sparse ones first), whose
        decoder rows are the true vectors and whose decoder bias is ``truth.bias``.
    """
    norms = np.sum(truth.vectors.astype(np.float64) ** 2, axis=1)
    w_enc = (truth.vectors / np.maximum(norms, 1e-30)[:, None]).T.astype(np.float32)
    if threshold is None:
        thresholds = (1.0 + off_reads(truth)) / 2
    else:
        thresholds = np.full(truth.num_sparse, threshold, np.float64)
    thresholds = np.concatenate([thresholds, np.zeros(len(truth.labels) - truth.num_sparse)]).astype(np.float32)
    b_enc = -(truth.bias @ w_enc)  # remove the constant part before reading
    return JumpReluCoder(w_enc, b_enc.astype(np.float32), thresholds, truth.vectors, truth.bias)


def off_reads(truth: GroundTruth, chunk: int = 2048) -> np.ndarray:
    """``[F']`` the most each sparse feature reads while it is off (:func:`perfect_coder`'s ``m_i``):
    per s-op (label ``name:value``), the largest positive ``v_i · v_j / |v_i|²`` over its values
    ``j != i``, summed over the s-ops. Computed ``chunk`` rows at a time (F' x F' is 1.1 GB at 16k)."""
    sparse_vectors = np.asarray(truth.vectors[:truth.num_sparse], np.float64)
    names = [label.split(":", 1)[0] for label in truth.labels[:truth.num_sparse]]
    order = np.argsort(names, kind="stable")
    sorted_names = np.asarray(names)[order]
    starts = np.flatnonzero(np.r_[True, sorted_names[1:] != sorted_names[:-1]])
    columns = sparse_vectors[order]
    norms = np.maximum(np.sum(sparse_vectors ** 2, axis=1), 1e-30)
    out = np.zeros(truth.num_sparse)
    for first in range(0, truth.num_sparse, chunk):
        rows = np.arange(first, min(first + chunk, truth.num_sparse))
        reads = (sparse_vectors[rows] @ columns.T) / norms[rows, None]
        reads[np.arange(len(rows)), np.argsort(order)[rows]] = 0.0  # a feature's read of itself
        out[rows] = np.maximum.reduceat(np.maximum(reads, 0.0), starts, axis=1).sum(axis=1) if len(starts) else 0.0
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class TopKOf:
    """``coder`` with each activation's latents cut to its ``k`` largest contributions
    (``|z_i| * |decoder row i|``), the others set to 0.

    Around :func:`perfect_coder` it is a fixed-k coder that holds the true dictionary: its explained
    variance is what a TopK SAE of that k reaches with the right dictionary where the true L0 varies
    from activation to activation (on near-orthogonal vectors, keeping the largest contributions is
    close to the best choice of k). It is a reference, not a bound: a learned dictionary of other
    directions can reconstruct more with the same k."""

    coder: SparseCoder
    k: int

    def __post_init__(self) -> None:
        if self.k < 1:
            raise LabError(f"TopKOf: k must be positive, got {self.k}")

    @property
    def decoder(self) -> np.ndarray:
        return self.coder.decoder

    def encode(self, x: np.ndarray) -> np.ndarray:
        z = np.asarray(self.coder.encode(x), np.float32)
        if self.k >= z.shape[1]:
            return z
        weight = np.abs(z) * np.linalg.norm(np.asarray(self.decoder, np.float32), axis=1)
        drop = np.argpartition(-weight, self.k, axis=1)[:, self.k:]
        cut = z.copy()
        np.put_along_axis(cut, drop, 0.0, axis=1)
        return cut

    def decode(self, z: np.ndarray) -> np.ndarray:
        return self.coder.decode(z)


@dataclasses.dataclass(frozen=True)
class Classification:
    precision: float
    recall: float
    f1_score: float
    accuracy: float


@dataclasses.dataclass(frozen=True)
class SyntheticScores:
    """SynthSAEBench's metrics (module docstring), same names as SAELens' result record."""

    true_l0: float
    sae_l0: float
    dead_latents: int
    shrinkage: float
    explained_variance: float
    mcc: float
    uniqueness: float
    classification: Classification


def abs_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|cos|`` between every row of ``a`` and every row of ``b`` (norms clamped at 1e-8)."""
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-8)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-8)
    return np.abs(a.astype(np.float32) @ b.T.astype(np.float32))


def hungarian(cosines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The one-to-one matching of rows to columns with the largest summed ``|cos|``."""
    return linear_sum_assignment(1.0 - cosines)


def dictionary_mcc(decoder: np.ndarray, vectors: np.ndarray) -> float:
    """SynthSAEBench's MCC: the mean ``|cos|`` of the Hungarian matching of ``decoder`` rows to ``vectors``.

    Args:
        decoder: ``[latents, d]``, the method's decoder rows.
        vectors: ``[F, d]``, the true vectors.

    Returns:
        The mean ``|cos|`` over the ``min(latents, F)`` matched pairs, in [0, 1].
    """
    cos = abs_cosines(np.asarray(decoder, np.float32), np.asarray(vectors, np.float32))
    rows, cols = hungarian(cos)
    return float(cos[rows, cols].mean())


@dataclasses.dataclass(frozen=True)
class Cofiring:
    """Which true directions always fire together in some data (:func:`cofiring`).

    Directions whose on/off pattern is identical over the data form one *class*. Replacing each
    class by the sum of its vectors (codes 1: categorical features) is another exact dictionary
    of the same data, sparser whenever a class has two or more members; a method that sees only
    activations has no reason to prefer the true one then.
    """

    classes: np.ndarray  # [F + G'] class number of each true direction
    num_classes: int
    true_l0: float  # mean true directions on per activation
    class_l0: float  # mean classes on per activation: the L0 of the class dictionary
    distinct_code_sets: int  # distinct on/off patterns: distinct activations of an exact model
    rows: int

    def class_vectors(self, vectors: np.ndarray) -> np.ndarray:
        """``[classes, d]``: each class's summed vectors (the sparser exact dictionary)."""
        out = np.zeros((self.num_classes, np.shape(vectors)[1]), np.float64)
        np.add.at(out, self.classes, np.asarray(vectors, np.float64))
        return out.astype(np.float32)


def cofiring(batches: Iterable[np.ndarray], seed: int = 0) -> Cofiring:
    """Co-firing classes of the true directions over ``[n, F + G']`` true-code batches.

    Columns and rows are compared by exact 64-bit hashes (sums of random integers over the
    entries that are on, with wrap-around), two per column, so the data is never held whole.

    Args:
        batches: true-code arrays ``[n, F + G']`` (e.g. :meth:`GroundTruth.codes` of shard
            batches), all with the same columns; a code counts as on where it is not 0. Read once.
        seed: seeds the random hash weights.

    Returns:
        The :class:`Cofiring` classes of the columns, with the true and class L0 and the number
        of distinct on/off patterns over the rows.

    Raises:
        LabError: no rows were given.
    """
    rng = np.random.default_rng(seed)
    column_hash = row_hashes = None
    rows = true_on = 0
    row_keys: set[tuple[int, int]] = set()
    on_rows: list[np.ndarray] = []
    for codes in batches:
        on = np.asarray(codes) != 0
        if column_hash is None:
            column_hash = np.zeros((on.shape[1], 2), np.uint64)
            row_hashes = rng.integers(0, 2**63, (on.shape[1], 2), dtype=np.uint64)
        weights = rng.integers(0, 2**63, (len(on), 2), dtype=np.uint64)
        with np.errstate(over="ignore"):
            column_hash += on.T.astype(np.uint64) @ weights
            row_keys.update(map(tuple, (on.astype(np.uint64) @ row_hashes).tolist()))
        true_on += int(on.sum())
        rows += len(on)
        on_rows.append(np.packbits(on, axis=1))
    if column_hash is None or rows == 0:
        raise LabError("cofiring: no true codes were given")
    _, first, classes = np.unique(column_hash, axis=0, return_index=True, return_inverse=True)
    width = column_hash.shape[0]
    class_on = sum(int(np.unpackbits(packed, axis=1, count=width)[:, first].sum()) for packed in on_rows)
    return Cofiring(classes.ravel(), len(first), true_on / rows, class_on / rows, len(row_keys), rows)


def synthetic_scores(coder: SparseCoder, truth: GroundTruth, batches: Iterable[tuple[np.ndarray, np.ndarray]]
                     ) -> SyntheticScores:
    """Score ``coder`` on ``(activations [n, d], true codes [n, F + G'])`` batches.

    Args:
        coder: the dictionary method under test (encoder, decoder and its rows).
        truth: the ground truth at the site; latents are matched against ``truth.vectors``.
        batches: ``(activations, codes)`` pairs, the codes in the column order of ``truth``
            (:meth:`GroundTruth.codes`); read once.

    Returns:
        The :class:`SyntheticScores`: L0s, dead latents, shrinkage, explained variance, MCC,
        uniqueness and the per-latent classification scores.

    Raises:
        LabError: ``batches`` holds no activations.
    """
    decoder = np.asarray(coder.decoder, np.float32)
    cos = abs_cosines(decoder, truth.vectors)
    best = np.argmax(cos, axis=1)
    latents = len(decoder)
    tp, fp, fn, tn = (np.zeros(latents, np.float64) for _ in range(4))
    fired = np.zeros(latents, bool)
    n = true_l0 = sae_l0 = shrink = 0.0
    shrink_n = 0
    sum_x = 0.0
    sum_sq = sum_res = 0.0
    for acts, codes in batches:
        acts = np.asarray(acts, np.float32)
        z = coder.encode(acts)
        out = coder.decode(z)
        on, gt_on = z != 0, np.asarray(codes)[:, best] > 0
        tp += np.sum(on & gt_on, axis=0)
        fp += np.sum(on & ~gt_on, axis=0)
        fn += np.sum(~on & gt_on, axis=0)
        tn += np.sum(~on & ~gt_on, axis=0)
        fired |= on.any(axis=0)
        true_l0 += float(np.sum(np.asarray(codes) != 0))
        sae_l0 += float(np.sum(on))
        norms = np.linalg.norm(acts, axis=1)
        keep = norms > MIN_INPUT_NORM
        shrink += float(np.sum(np.linalg.norm(out, axis=1)[keep] / norms[keep]))
        shrink_n += int(keep.sum())
        x64 = acts.astype(np.float64)
        sum_x = sum_x + x64.sum(axis=0)
        sum_sq += float(np.sum(x64 ** 2))
        sum_res += float(np.sum((x64 - out) ** 2))
        n += len(acts)
    if n == 0:
        raise LabError("synthetic_scores: no activations were given")
    variance = sum_sq / n - float(np.sum((sum_x / n) ** 2))
    mse = sum_res / n
    explained = (1.0 if mse < 1e-10 else 0.0) if variance < 1e-10 else 1.0 - mse / variance
    return SyntheticScores(true_l0 / n, sae_l0 / n, int((~fired).sum()), shrink / max(shrink_n, 1), explained,
                           dictionary_mcc(decoder, truth.vectors), len(np.unique(best)) / latents,
                           _classification(tp, fp, fn, tn))


def _classification(tp, fp, fn, tn) -> Classification:
    def ratio(num, den):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)

    precision, recall = ratio(tp, tp + fp), ratio(tp, tp + fn)
    f1 = ratio(2 * precision * recall, precision + recall)
    accuracy = (tp + tn) / np.maximum(tp + fp + fn + tn, 1e-8)
    return Classification(float(precision.mean()), float(recall.mean()), float(f1.mean()), float(accuracy.mean()))

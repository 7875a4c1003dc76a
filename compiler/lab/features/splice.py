"""What only a compiled model allows: put a dictionary's reconstruction back and read the outputs.

* :func:`spliced_accuracy`: replace the stream at a residual site by the reconstruction (at real
  token positions; BOS and PAD keep their activation) and score the decoded outputs against RASP.
* :func:`causal_use`: a true feature is *used* when removing it (``x - code * vector`` at one
  position) changes a decoded output; a latent is *used* when removing it from the spliced
  reconstruction does. The score is the share of used true features whose Hungarian partner
  latent matches (``|cos| >= MATCH_COSINE``) and is used too.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from compiler import CompiledModel
from compiler.errors import LabError
from compiler.lab.features.dictionary import TrueDictionary, real_positions
from compiler.lab.features.evaluation import OutputAccuracy, References, accuracy_of
from compiler.lab.features.metrics import MATCH_COSINE, GroundTruth, SparseCoder, abs_cosines, ground_truth, hungarian
from compiler.lab.features.sites import Site, SiteRunner


def reconstruct_stream(compiled: CompiledModel, coder: SparseCoder, acts: np.ndarray, ids: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """``(stream, latents)``: ``acts`` with real positions replaced by ``coder``'s reconstruction,
    and the latents there (``[batch, T, latents]``, 0 at BOS and PAD)."""
    mask = real_positions(compiled, ids)
    z = coder.encode(acts[mask])
    stream = np.array(acts, np.float32)
    stream[mask] = coder.decode(z)
    latents = np.zeros(acts.shape[:2] + (z.shape[1],), np.float32)
    latents[mask] = z
    return stream, latents


def decoded(compiled: CompiledModel, output: np.ndarray) -> np.ndarray:
    """``[batch, T, programs]``: each program's decoded value index (as its output encoder decodes
    it: the argmax, -1 for None), or its value for a numerical output (rounded to 1e-3)."""
    output = np.asarray(output)
    if output.ndim == 2:
        output = output[..., None]
    parts = []
    for part in compiled.output_parts:
        block = output[..., part.columns]
        if part.numerical:
            parts.append(np.round(block[..., 0], 3))
        else:  # an ablated output (all zeros up to float noise) decodes as None, -1
            parts.append(part.encoder.value_indices(block))
    return np.stack(parts, axis=-1)


def spliced_accuracy(compiled: CompiledModel, coder: SparseCoder, refs: References, site: Site,
                     projection: np.ndarray | None = None, batch_inputs: int = 2048) -> OutputAccuracy:
    """Decoded-output accuracy against RASP with ``coder``'s reconstruction spliced in at ``site``.

    Args:
        compiled: the compiled model.
        coder: the dictionary method under test (encoder, decoder), trained on the stream at ``site``.
        refs: RASP's outputs on the inputs (:func:`compiler.lab.features.evaluation.rasp_references`).
        site: the residual snapshot whose stream is replaced at real token positions (BOS and
            PAD keep theirs).
        projection: ``W`` (``[D, d]``) of the compressed model ``coder`` reads, or None for the
            exact model.
        batch_inputs: inputs per spliced forward pass.

    Returns:
        The :class:`~compiler.lab.features.evaluation.OutputAccuracy` of the spliced model.

    Raises:
        LabError: ``site`` is not a residual snapshot of the model, the reconstruction's width
            is not the stream's, or ``batch_inputs`` is below 1.
    """
    runner = SiteRunner(compiled, projection)

    def run(ids: np.ndarray) -> np.ndarray:
        stream, _ = reconstruct_stream(compiled, coder, np.asarray(runner.activations(ids, site)), ids)
        return _spliced(runner, site, ids, stream, decode=False)

    return accuracy_of(compiled, refs, run, batch_inputs)


@dataclasses.dataclass(frozen=True)
class CausalUse:
    """Result of :func:`causal_use`."""

    features: int  # true directions at the site that occur in the inputs
    used: int  # of those, the ones whose removal changes an output
    matched: int  # of those used, with a partner latent at |cos| >= MATCH_COSINE
    matched_and_used: int  # ... whose removal from the reconstruction changes an output too

    @property
    def fraction(self) -> float:
        return self.matched_and_used / max(self.used, 1)


def causal_use(compiled: CompiledModel, dictionary: TrueDictionary, coder: SparseCoder, ids: np.ndarray,
               projection: np.ndarray | None = None, examples: int = 2, batch_inputs: int = 2048,
               seed: int = 0, truth: GroundTruth | None = None) -> CausalUse:
    """Count true features that are used downstream and have a matched, used latent (module docstring).

    Each true direction (of ``truth``, default :func:`ground_truth` of the dictionary) is tried at
    up to ``examples`` positions where it is on in ``ids``.

    Args:
        compiled: the compiled model.
        dictionary: the true dictionary at a residual site (:func:`true_dictionary` with the same
            ``projection``); its site is where features are removed and the stream spliced.
        coder: the dictionary method under test, trained on the stream at that site.
        ids: the inputs, ``[N, T]`` token ids (BOS first, PAD after each input's end).
        projection: ``W`` (``[D, d]``) of the compressed model, or None for the exact model.
        examples: at most this many positions per true direction, drawn at random among those
            where it is on.
        batch_inputs: ablated inputs per spliced forward pass.
        seed: seeds the choice of positions.
        truth: the true directions and their codes; None for ``ground_truth(dictionary)``.

    Returns:
        The :class:`CausalUse` counts; ``fraction`` (matched and used over used) is the score.

    Raises:
        LabError: the dictionary's site is not a residual snapshot, or not one of the model's.
    """
    site = dictionary.site
    if site.kind != "resid":
        raise LabError(f"{site}: causal use splices a residual snapshot; use Site('resid', k)")
    truth = truth or ground_truth(dictionary)
    runner, exact = SiteRunner(compiled, projection), SiteRunner(compiled)
    acts = np.asarray(runner.activations(ids, site))
    values = np.asarray(exact.activations(ids, site))
    codes = truth.codes(dictionary.codes(values), dictionary.dense_codes(values))
    codes = codes * real_positions(compiled, ids)[..., None]
    stream, latents = reconstruct_stream(compiled, coder, acts, ids)
    cos = abs_cosines(np.asarray(coder.decoder, np.float32), truth.vectors)
    rows, cols = hungarian(cos)
    partner = np.full(len(truth.labels), -1)
    good = cos[rows, cols] >= MATCH_COSINE
    partner[cols[good]] = rows[good]
    rng = np.random.default_rng(seed)
    jobs = []  # (feature, input row, position)
    for feature in range(len(truth.labels)):
        where = np.argwhere(codes[..., feature] != 0)
        if len(where):
            for row, position in where[rng.permutation(len(where))[:examples]]:
                jobs.append((feature, int(row), int(position)))
    features = len({f for f, _, _ in jobs})
    true_base = _spliced(runner, site, ids, acts)
    sae_base = _spliced(runner, site, ids, stream)
    true_used = np.zeros(len(truth.labels), bool)
    sae_used = np.zeros(len(truth.labels), bool)
    decoder = np.asarray(coder.decoder, np.float32)
    for start in range(0, len(jobs), batch_inputs):
        chunk = jobs[start:start + batch_inputs]
        f, b, t = (np.asarray(x) for x in zip(*chunk))
        rows_ids = np.asarray(ids)[b]
        real = real_positions(compiled, rows_ids)
        ablated = acts[b].copy()
        ablated[np.arange(len(b)), t] -= codes[b, t, f][:, None] * truth.vectors[f]
        changed = np.any((_spliced(runner, site, rows_ids, ablated) != true_base[b])
                         & real[..., None], axis=(1, 2))
        np.logical_or.at(true_used, f, changed)
        j = partner[f]
        sae_ablated = stream[b].copy()
        weight = np.where(j >= 0, latents[b, t, np.maximum(j, 0)], 0.0)
        sae_ablated[np.arange(len(b)), t] -= weight[:, None] * decoder[np.maximum(j, 0)]
        changed = np.any((_spliced(runner, site, rows_ids, sae_ablated) != sae_base[b])
                         & real[..., None], axis=(1, 2)) & (j >= 0)
        np.logical_or.at(sae_used, f, changed)
    matched = true_used & (partner >= 0)
    return CausalUse(features, int(true_used.sum()), int(matched.sum()), int((matched & sae_used).sum()))


def _spliced(runner: SiteRunner, site: Site, ids: np.ndarray, stream: np.ndarray, batch: int = 512,
             decode: bool = True) -> np.ndarray:
    """Spliced outputs in fixed-size batches (the last one padded), so JAX compiles one shape:
    :func:`decoded` per batch (``[N, T, programs]``; the logits of a wide multi-output model are
    large), or the logits themselves when not ``decode``."""
    outputs = []
    for start in range(0, len(ids), batch):
        part_ids, part = ids[start:start + batch], stream[start:start + batch]
        n = len(part_ids)
        if n < batch and len(ids) > batch:
            part_ids = np.concatenate([part_ids, np.repeat(part_ids[:1], batch - n, axis=0)])
            part = np.concatenate([part, np.repeat(part[:1], batch - n, axis=0)])
        logits = np.asarray(runner.spliced_output(part_ids, site, part))[:n]
        outputs.append(decoded(runner.compiled, logits) if decode else logits)
    return np.concatenate(outputs)

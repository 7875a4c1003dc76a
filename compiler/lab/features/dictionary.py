"""The true dictionary of a compiled model at a site: which directions the activations are made of.

A compiled model's residual stream has one labelled coordinate per value of every categorical
s-op (``name:value``), one per numerical s-op, and a few markers. Compressed by ``W`` (``[D, d]``),
coordinate ``i`` is carried on row ``W[i]`` of the projection, so the d-dimensional stream at a
site is ``x @ W`` where ``x`` holds the compiled coordinates, which the program determines. The
*true dictionary* at a residual site is therefore:

* **features** (sparse): the categorical coordinates present at the site (written by the
  embedding or an earlier sub-layer) whose row of ``W`` is not zero; feature vector ``W[i]``,
  code ``x_i`` (0 or 1: at most one value of an s-op is on at a position);
* **dense directions**, reported apart: ``one`` (1 everywhere), the positions (``indices:*``),
  the ``tokens:BOS`` / ``tokens:PAD`` markers, numerical s-ops and attention-internal directions;
* **dropped** coordinates: present, but with a zero row of ``W`` (nothing reads them, so the
  analytic projection does not carry them; ``compression.analytic.structure``'s *unread* coordinates).

For the uncompressed model ``W`` is the identity: the dictionary is the labelled basis. At an MLP
site (for transcoders) the features are the MLP's hidden units: the code is the unit's activation
and the vector is what the unit writes into the stream (its row of ``w_out``, times ``W``).

:func:`check_dictionary` measures the claim: activations equal codes times dictionary.

In a model with a norm (``compile_rasp(norm=...)``) the sites hold the stream before the norm, so
the dictionary is the same; what reads a residual site (sub-layer ``k`` reads snapshot ``k``, the
unembedding the last) reads it times the norm's factor ``gain / sqrt(var + eps)`` (after centring,
for LayerNorm), which the compiler keeps within ``1 +- spread`` (``TrueDictionary.norm``), and an
MLP site's hidden codes already hold that factor. The anchor coordinates that keep it there are
dense directions. :func:`check_dictionaries` measures the factor at each site
(``DictionaryCheck.norm_factor``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from compiler import CompiledModel
from compiler.errors import LabError
from compiler.lab.features.sites import Site, SiteRunner, check_site, sparse_matrix
from compiler.model.config import MODULE_NAME, AttentionSpec, NormSpec, SparseLinear
from compiler.model.norm import read_factor
from compiler.model.tying import untied
from craft.bases import ONE_NAME, TOKENS_NAME

INDICES_NAME = "indices"
# Compiled coordinates below this are float noise (a selector-width MLP leaves ~1e-7 on values
# that are off); as codes they are 0. The same slack compression's interference bound starts from.
CODE_FLOOR = 1e-4


@dataclasses.dataclass(frozen=True, eq=False)
class TrueDictionary:
    """Ground-truth features at one site (module docstring); rows of ``vectors`` are features."""

    site: Site
    labels: tuple[str, ...]  # feature labels, e.g. "mix3:17"
    coords: np.ndarray  # [F] int: compiled residual coordinate (resid site) or hidden unit (MLP site)
    vectors: np.ndarray  # [F, width] float32
    dense_labels: tuple[str, ...]
    dense_coords: np.ndarray  # [G] int
    dense_vectors: np.ndarray  # [G, width] float32
    dropped: tuple[str, ...]  # present at the site, but with a zero vector
    norm: NormSpec | None = None  # the norm the site is read through: a factor within 1 +- norm.spread

    @property
    def read_factor_range(self) -> tuple[float, float] | None:
        """The stated range of the factor the site's reader multiplies it by (None: no norm)."""
        return None if self.norm is None else (1.0 - self.norm.spread, 1.0 + self.norm.spread)

    @property
    def num_features(self) -> int:
        return len(self.labels)

    @property
    def width(self) -> int:
        return int(self.vectors.shape[1])

    def codes(self, compiled_values: np.ndarray) -> np.ndarray:
        """``[..., F]`` feature codes from the exact model's ``[..., D]`` residual (or hidden) values;
        values within ``CODE_FLOOR`` of 0 are 0."""
        values = np.asarray(compiled_values)[..., self.coords]
        return np.where(np.abs(values) < CODE_FLOOR, 0.0, values).astype(np.float32)

    def dense_codes(self, compiled_values: np.ndarray) -> np.ndarray:
        """``[..., G]`` codes of the dense directions."""
        return np.asarray(compiled_values)[..., self.dense_coords]

    def reconstruct(self, codes: np.ndarray, dense_codes: np.ndarray | None = None) -> np.ndarray:
        """``codes @ vectors`` (plus the dense part when given): the site's activations."""
        out = np.asarray(codes, np.float32) @ self.vectors
        if dense_codes is not None and len(self.dense_labels):
            out = out + np.asarray(dense_codes, np.float32) @ self.dense_vectors
        return out


def is_dense(label: str, value_is_none: bool) -> bool:
    """Whether a residual label is a dense direction (module docstring) rather than a feature."""
    name = label.split(":", 1)[0]
    return (value_is_none or name in (ONE_NAME, INDICES_NAME) or label.endswith("_hidden_attn")
            or label in (f"{TOKENS_NAME}:BOS", f"{TOKENS_NAME}:PAD"))


def written_columns(spec: SparseLinear, param: np.ndarray) -> set[int]:
    """Residual coordinates a weight writes with a non-zero entry (never densifies a sparse one)."""
    param = np.asarray(param)
    if spec.is_sparse:
        local = np.unique(spec.pattern[1][param != 0])
    else:
        local = np.nonzero(np.any(param != 0, axis=0))[0]
    return set(local.tolist() if spec.out_idx is None else np.asarray(spec.out_idx)[local].tolist())


def written_at(compiled: CompiledModel) -> np.ndarray:
    """Per residual coordinate, the first snapshot it can be non-zero in (0: the embedding;
    ``k``: written by executed sub-layer ``k - 1``); ``len(layers) + 1`` for a coordinate nothing
    writes."""
    compiled = untied(compiled)
    config, params = compiled.config, compiled.params
    first = np.full(config.residual_width, len(config.layers) + 1, np.int64)
    embed = params[f"{MODULE_NAME}/embed"]
    columns = written_columns(config.token_embed, embed["token"])
    if "position" in embed:
        columns |= written_columns(config.pos_embed, embed["position"])
    first[list(columns)] = 0
    for index, layer in enumerate(config.layers):
        weights = params.get(f"{MODULE_NAME}/layer_{index}", {})
        if isinstance(layer, AttentionSpec):
            columns = set()
            for h, head in enumerate(layer.heads):
                columns |= written_columns(head.w_o, weights[f"head_{h}_o"])
        else:
            columns = written_columns(layer.w_out, weights["w_out"]) if layer.w_out.shape[0] else set()
        for c in columns:
            first[c] = min(first[c], index + 1)
    return first


def true_dictionary(compiled: CompiledModel, site: Site, projection: np.ndarray | None = None) -> TrueDictionary:
    """The true dictionary of ``compiled`` (compressed by ``projection``, or not) at ``site``.

    Args:
        compiled: the compiled model.
        site: ``Site("resid", k)`` or ``Site("mlp", i)`` (:mod:`compiler.lab.features.sites`).
        projection: ``W``, ``[D, d]``, or None for the exact model (the identity).

    Returns:
        The :class:`TrueDictionary`.

    Raises:
        LabError: the site does not exist, ``projection`` has the wrong number of rows, or the
            site is a bilinear (gated) MLP, whose hidden units come in pairs.
    """
    check_site(compiled, site)
    compiled = untied(compiled)  # a compiled loop: one copy of its tied block per iteration
    width_d = compiled.config.residual_width
    if projection is not None and np.shape(projection)[0] != width_d:
        raise LabError(f"projection has {np.shape(projection)[0]} rows; the model's residual has D = {width_d}")
    if site.kind == "mlp":
        return _mlp_dictionary(compiled, site, projection)
    labels = compiled.residual_labels
    basis = compiled.residual_space.basis
    present = np.nonzero(written_at(compiled) <= site.index)[0]
    w = np.eye(width_d, dtype=np.float32) if projection is None else np.asarray(projection, np.float32)
    features, dense, dropped = [], [], []
    for i in present:
        if is_dense(labels[i], basis[i].value is None):
            dense.append(i)
        elif np.any(w[i] != 0):
            features.append(i)
        else:
            dropped.append(labels[i])
    kept, spread = np.asarray(features, np.int64), np.asarray(dense, np.int64)
    return TrueDictionary(site, tuple(labels[i] for i in kept), kept, w[kept],
                          tuple(labels[i] for i in spread), spread, w[spread], tuple(dropped), compiled.config.norm)


def hidden_labels(compiled: CompiledModel, index: int) -> tuple[str, ...]:
    """Names of MLP sub-layer ``index``'s hidden units (``<label>_hidden:<value>`` where known)."""
    width = compiled.config.layers[index].w_in.shape[1]
    block = compiled.sublayers[index] if compiled.sublayers else None
    first = getattr(block, "first", None)
    if first is not None and first.output_space.num_dims == width:
        return tuple(str(d) for d in first.output_space.basis)
    return tuple(f"layer_{index}_hidden:{j}" for j in range(width))


def _mlp_dictionary(compiled: CompiledModel, site: Site, projection: np.ndarray | None) -> TrueDictionary:
    layer = compiled.config.layers[site.index]
    if layer.activation == "bilinear":
        raise LabError(f"{site}: a bilinear (gated) MLP's hidden units are pairs; no per-unit dictionary")
    param = np.asarray(compiled.params[f"{MODULE_NAME}/layer_{site.index}"]["w_out"])
    hidden, width_d = layer.w_in.shape[1], compiled.config.residual_width
    matrix = sparse_matrix(layer.w_out, param, hidden, width_d)
    vectors = matrix.toarray() if projection is None else np.asarray(matrix @ np.asarray(projection, np.float32))
    vectors = np.asarray(vectors, np.float32)
    names = hidden_labels(compiled, site.index)
    live = np.nonzero(np.any(vectors != 0, axis=1))[0]
    alive = set(live.tolist())
    dead = [names[j] for j in range(hidden) if j not in alive]
    empty = np.zeros((0, vectors.shape[1]), np.float32)
    return TrueDictionary(site, tuple(names[j] for j in live), live, vectors[live], (), np.zeros(0, np.int64),
                          empty, tuple(dead), compiled.config.norm)


@dataclasses.dataclass(frozen=True)
class DictionaryCheck:
    """How well codes times dictionary reproduce a site's activations on some inputs."""

    positions: int  # real token positions compared (BOS and PAD excluded)
    max_abs_error: float
    max_activation: float  # largest |activation| seen, the scale of the error
    norm_factor: tuple[float, float] | None = None  # least and largest factor its reader's norm applied (None: no norm)

    @property
    def relative_error(self) -> float:
        return self.max_abs_error / max(self.max_activation, 1e-30)


def real_positions(compiled: CompiledModel, ids: np.ndarray) -> np.ndarray:
    """``[batch, T]`` bool: positions holding a real token (not BOS, not PAD)."""
    ids = np.asarray(ids)
    mask = ids != compiled.config.pad_id
    mask[:, 0] = False
    return mask


def check_dictionaries(compiled: CompiledModel, dictionaries: list[TrueDictionary], ids: np.ndarray,
                       projection: np.ndarray | None = None) -> list[DictionaryCheck]:
    """Compare each site's activations (the model compressed by ``projection``) with codes times
    its dictionary at every real position of ``ids``; the codes come from the exact model.

    Args:
        compiled: the compiled model.
        dictionaries: the true dictionaries to check (:func:`true_dictionary`, built with the same
            ``projection``), one per site.
        ids: the inputs, ``[N, T]`` token ids (BOS first, PAD after each input's end).
        projection: ``W`` (``[D, d]``) of the compressed model, or None for the exact model.

    Returns:
        One :class:`DictionaryCheck` per dictionary, in order: positions compared, the largest
        absolute error, the largest activation and, in a model with a norm, the range of the
        factor the norm reading the site (an MLP site: reading its input) applied.
    """
    compressed = SiteRunner(compiled, projection).capture(ids)
    exact = SiteRunner(compiled).capture(ids) if projection is not None else compressed
    mask = real_positions(compiled, ids)
    checks = []
    for dictionary in dictionaries:
        acts = compressed.activations(dictionary.site)
        values = exact.values(dictionary.site)
        rebuilt = dictionary.reconstruct(dictionary.codes(values), dictionary.dense_codes(values))
        error = np.abs(acts - rebuilt)[mask]
        factor = None
        if compiled.config.norm is not None and mask.any():
            read = read_factor(compiled.config.norm, compressed.streams[dictionary.site.index][mask])
            factor = (float(read.min()), float(read.max()))
        checks.append(DictionaryCheck(int(mask.sum()), float(error.max(initial=0.0)),
                                      float(np.abs(acts[mask]).max(initial=0.0)), factor))
    return checks


def check_dictionary(compiled: CompiledModel, dictionary: TrueDictionary, ids: np.ndarray,
                     projection: np.ndarray | None = None) -> DictionaryCheck:
    """:func:`check_dictionaries` for one dictionary."""
    return check_dictionaries(compiled, [dictionary], ids, projection)[0]

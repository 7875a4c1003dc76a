"""Train one-layer attention-only models on a database's facts (JAX + optax, jitted, seeded).

Each fact ``(k, q, v)`` is the two-token prompt ``(k, q)``; the loss is cross-entropy for
predicting ``q`` at position 0 and ``v`` at position 1, full batch, Adam.  Accuracy is measured
on the training facts only, at the last position, with softmax over the whole vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from constructions.facts.attention_layer import AttentionLayer, TokenCircuits
from constructions.facts.database import Database
from constructions.facts.db_rank import slice_bound
from constructions.facts.layer_tensor import layer_capacity, layer_tensors
from constructions.facts.metrics import RecallScores, recall_scores


@dataclass(frozen=True)
class LayerShape:
    """``(d_model, n_heads, d_qk, d_vo)`` of an attention-only layer."""

    d_model: int
    n_heads: int
    d_qk: int
    d_vo: int

    @property
    def capacity(self) -> int:
        """Inequality (9)'s ``d_model + n_heads * d_vo``."""
        return layer_capacity(self.d_model, self.n_heads, self.d_vo)


@dataclass(frozen=True)
class TrainConfig:
    """Optimiser settings of the reproduction (Adam, full batch)."""

    steps: int = 2000
    learning_rate: float = 0.02
    b1: float = 0.9
    b2: float = 0.999
    seed: int = 0


@dataclass(frozen=True)
class CapacityResult:
    """One trained (database, layer) pair."""

    n_facts: int
    db_bound: int
    layer_bound: int
    scores: RecallScores
    final_loss: float
    prop_3_1_error: float  # relative to the largest |logit| (float32 forward vs float64 L)
    layer: AttentionLayer


def init_params(vocab_size: int, shape: LayerShape, key: jax.Array) -> dict[str, jax.Array]:
    """Gaussian weights with variance ``1 / fan_in`` (fan-in = the input axis)."""
    h, d, dqk, dvo = shape.n_heads, shape.d_model, shape.d_qk, shape.d_vo
    shapes = {"w_e": (vocab_size, d), "w_u": (d, vocab_size), "w_q": (h, d, dqk),
              "w_k": (h, d, dqk), "w_v": (h, d, dvo), "w_o": (h, dvo, d)}
    keys = jax.random.split(key, len(shapes))
    return {name: jax.random.normal(k, s) / jnp.sqrt(s[-2])
            for k, (name, s) in zip(keys, shapes.items())}


def forward(params: dict[str, jax.Array], tokens: jax.Array) -> jax.Array:
    """Causal attention-only layer on ``tokens (batch, n)`` -> logits ``(batch, n, T)``."""
    x = params["w_e"][tokens]
    n = tokens.shape[1]
    q = jnp.einsum("bnd,hde->bhne", x, params["w_q"])
    k = jnp.einsum("bnd,hde->bhne", x, params["w_k"])
    scores = jnp.einsum("bhse,bhte->bhst", q, k)
    mask = jnp.tril(jnp.ones((n, n), dtype=bool))
    pattern = jax.nn.softmax(jnp.where(mask, scores, -jnp.inf), axis=-1)
    v = jnp.einsum("bnd,hde->bhne", x, params["w_v"])
    moved = jnp.einsum("bhst,bhte,hed->bsd", pattern, v, params["w_o"])
    return (x + moved) @ params["w_u"]


def _loss(params: dict[str, jax.Array], prompts: jax.Array, targets: jax.Array) -> jax.Array:
    logits = forward(params, prompts)
    return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()


@partial(jax.jit, static_argnames=("steps", "optimizer"))
def _train(params: dict[str, jax.Array], prompts: jax.Array, targets: jax.Array, steps: int,
           optimizer: optax.GradientTransformation) -> tuple[dict[str, jax.Array], jax.Array]:
    def step(carry, _):
        p, state = carry
        loss, grads = jax.value_and_grad(_loss)(p, prompts, targets)
        updates, state = optimizer.update(grads, state, p)
        return (optax.apply_updates(p, updates), state), loss

    (params, _), losses = jax.lax.scan(step, (params, optimizer.init(params)), None, length=steps)
    return params, losses[-1]


@cache
def _adam(learning_rate: float, b1: float, b2: float) -> optax.GradientTransformation:
    """One optimiser object per setting, so same-shaped runs reuse the compiled step."""
    return optax.adam(learning_rate, b1=b1, b2=b2)


def fact_batch(db: Database) -> tuple[np.ndarray, np.ndarray, tuple]:
    """Prompts ``(|D|, 2)``, targets ``(|D|, 2)`` (next tokens) and the token list used."""
    tokens = db.tokens
    ids = {t: i for i, t in enumerate(tokens)}
    prompts = np.array([[ids[k], ids[q]] for k, q, _ in db.facts], dtype=np.int32)
    targets = np.array([[ids[q], ids[v]] for _, q, v in db.facts], dtype=np.int32)
    return prompts, targets, tokens


def train_on_database(db: Database, shape: LayerShape,
                      config: TrainConfig = TrainConfig()) -> CapacityResult:
    """Train one layer on ``db`` and score recall at the last position of each fact."""
    prompts, targets, tokens = fact_batch(db)
    params = init_params(len(tokens), shape, jax.random.PRNGKey(config.seed))
    optimizer = _adam(config.learning_rate, config.b1, config.b2)
    params, loss = _train(params, jnp.asarray(prompts), jnp.asarray(targets), config.steps,
                          optimizer)
    last_logits = np.asarray(forward(params, jnp.asarray(prompts))[:, -1], dtype=np.float64)
    layer = AttentionLayer(**{k: np.asarray(v, dtype=np.float64) for k, v in params.items()})
    return CapacityResult(
        n_facts=db.size,
        db_bound=slice_bound(db).bound,
        layer_bound=shape.capacity,
        scores=recall_scores(last_logits, targets[:, 1]),
        final_loss=float(loss),
        prop_3_1_error=_prop_3_1_error(layer, prompts, last_logits),
        layer=layer,
    )


def _prop_3_1_error(layer: AttentionLayer, prompts: np.ndarray, logits: np.ndarray) -> float:
    """Largest gap between ``L[k, q, :]`` (float64) and the float32 logits, over max(1, |logit|)."""
    circuits = TokenCircuits.from_layer(layer)
    subjects, predicates = np.unique(prompts[:, 0]), np.unique(prompts[:, 1])
    total = layer_tensors(circuits, subjects, predicates).total
    rows = total[np.searchsorted(subjects, prompts[:, 0]), np.searchsorted(predicates, prompts[:, 1])]
    return float(np.abs(rows - logits).max() / max(1.0, float(np.abs(logits).max())))

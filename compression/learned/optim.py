"""AdamW and its learning-rate schedule for training W (Tracr paper, appendix E)."""

from __future__ import annotations

import optax

from compression.learned.config import OptimizerConfig


def learning_rate_schedule(config: OptimizerConfig, total_steps: int) -> optax.Schedule:
    """``"linear"``: from ``lr_init`` to ``lr_final`` over ``decay_fraction * total_steps``, then
    flat. ``"warmup_cosine"``: 0 to ``lr_init`` over ``warmup_fraction * total_steps``, then a
    cosine to ``lr_final`` at ``total_steps``."""
    if config.schedule == "warmup_cosine":
        warmup = int(round(config.warmup_fraction * total_steps))
        return optax.warmup_cosine_decay_schedule(0.0, config.lr_init, warmup, max(total_steps, warmup + 1),
                                                  config.lr_final)
    decay_steps = max(1, int(round(config.decay_fraction * total_steps)))
    return optax.linear_schedule(config.lr_init, config.lr_final, transition_steps=decay_steps)


def make_optimizer(config: OptimizerConfig, total_steps: int) -> optax.GradientTransformation:
    """optax AdamW with the configured betas, weight decay and schedule."""
    return optax.adamw(
        learning_rate=learning_rate_schedule(config, total_steps),
        b1=config.b1,
        b2=config.b2,
        eps=config.eps,
        weight_decay=config.weight_decay,
    )

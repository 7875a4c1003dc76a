"""Run the auto-circuit package (PyPI `auto-circuit`) on a compiled model's TransformerLens export.

auto-circuit 1.0.1 imports `HookedTransformer` and `HookedTransformerKeyValueCache` from
`transformer_lens` at import time. TransformerLens 4 removed `HookedTransformer`; 3.x keeps it but
renamed the cache class (`TransformerLensKeyValueCache`), which `_alias_key_value_cache` points the
old names at; every 2.x needs numpy < 2, which the project's core excludes. So auto-circuit runs
next to TransformerLens 3.x (the `circuits` extra; measured on 3.9.0, and on 2.16.1 installed by
hand), not next to the `export` extra's 4.x. This module builds a `HookedTransformer` from
`compiler.io.export.export_weights` (unscaled attention, the exported PAD mask) rather than
`to_transformer_lens`, which targets the 4.x bridge.

auto-circuit scores next-token behaviour: one answer per prompt at the last position. The
bridge feeds it full-length inputs (no PAD), the clean decoded value at the last position as the
answer, every other output value as wrong answers, and, as corrupt prompts, the resampled inputs
(same length), so its ablation matches `resample`. Its prune scores come back keyed by its edge
names ("A0.1->A1.0.Q"); `scores_by_edge` maps them onto a `CircuitRecord`'s edges (both embeddings
share auto-circuit's "Resid Start").
"""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np

from compiler.io.export import export_weights
from compiler.lab.circuits.ablation import resample_order
from compiler.lab.circuits.record import CircuitRecord
from compiler.model.compiled_model import CompiledModel


def hooked_transformer(model: CompiledModel) -> Any:
    """A TransformerLens 2.x / 3.x `HookedTransformer` with the compiled weights, set up for
    auto-circuit (split q/k/v inputs, per-head results, MLP input hooks)."""
    import torch
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    exported = export_weights(model, attn_scale=None)
    fields = set(HookedTransformerConfig.__dataclass_fields__)
    cfg = HookedTransformerConfig(**{k: v for k, v in exported.config.items() if k in fields}, device="cpu")
    tl_model = HookedTransformer(cfg)
    state = {name: torch.tensor(value) for name, value in exported.state_dict.items()}
    tl_model.load_state_dict(state, strict=False)
    tl_model.cfg.use_attn_result = True
    tl_model.cfg.use_split_qkv_input = True
    tl_model.cfg.use_hook_mlp_in = True
    tl_model.setup()
    return tl_model.eval()


def _alias_key_value_cache() -> None:
    """Let auto-circuit 1.0.1 import next to TransformerLens 3.x.

    auto-circuit imports `HookedTransformerKeyValueCache` from `transformer_lens` and from
    `transformer_lens.past_key_value_caching`; TransformerLens 3 renamed the class
    `TransformerLensKeyValueCache` (in `transformer_lens.cache.key_value_cache`) and dropped that
    module. auto-circuit only names the class in signatures, so both old names are pointed at
    the new class. Nothing happens on TransformerLens 2.x, which has them.
    """
    import transformer_lens

    if hasattr(transformer_lens, "HookedTransformerKeyValueCache"):
        return
    from transformer_lens.cache.key_value_cache import TransformerLensKeyValueCache

    old = types.ModuleType("transformer_lens.past_key_value_caching")
    # Through the modules' namespaces: neither module declares the old name on this line.
    vars(old)["HookedTransformerKeyValueCache"] = TransformerLensKeyValueCache
    sys.modules.setdefault(old.__name__, old)
    vars(transformer_lens)["HookedTransformerKeyValueCache"] = TransformerLensKeyValueCache


def run_eap(model: CompiledModel, ids: np.ndarray, output_values: int) -> dict[str, float]:
    """auto-circuit's edge attribution patching on `ids` (`[B, T]`, no PAD); `{edge name: score}`.

    Args:
        model: the compiled model; it is exported to a TransformerLens 2.x / 3.x
            `HookedTransformer` (`hooked_transformer`).
        ids: the clean prompts, `[B, T]` token ids starting with BOS and holding no PAD; each
            row's corrupt prompt is another row (`resample_order`: the next row, cyclically).
        output_values: how many logit columns, from the first, are the answers: a prompt's
            answer is the argmax of those at the last position in the clean run, the others are
            its wrong answers.
    Returns:
        The absolute prune score auto-circuit gives each edge, keyed by its edge name
        ("A0.1->A1.0.Q"); `scores_by_edge` puts them in a record's edge order.
    Raises:
        ImportError: torch, TransformerLens or auto-circuit is not installed (the `circuits`
            extra).
    """
    import torch

    _alias_key_value_cache()
    from auto_circuit.data import PromptDataLoader, PromptDataset
    from auto_circuit.prune_algos.edge_attribution_patching import edge_attribution_patching_prune_scores
    from auto_circuit.utils.graph_utils import patchable_model

    tl_model = hooked_transformer(model)
    clean = torch.tensor(np.asarray(ids), dtype=torch.long)
    corrupt = clean[torch.tensor(resample_order(ids, model.input_encoder.pad_id))]
    with torch.no_grad():
        last = tl_model(clean)[:, -1, :output_values]
    answers = [row.argmax().reshape(1) for row in last]
    wrong = [torch.tensor([v for v in range(output_values) if v != int(a)]) for a in answers]
    dataset = PromptDataset(clean, corrupt, answers, wrong)
    loader = PromptDataLoader(dataset, seq_len=None, diverge_idx=0, batch_size=len(clean))
    patchable = patchable_model(tl_model, factorized=True, slice_output="last_seq", separate_qkv=True,
                                device=torch.device("cpu"))
    scores = edge_attribution_patching_prune_scores(patchable, loader, official_edges=None)
    return {edge.name: float(edge.prune_score(scores).abs()) for edge in patchable.edges}


def scores_by_edge(record: CircuitRecord, scores: dict[str, float]) -> np.ndarray:
    """auto-circuit scores in the record's edge order (0 for an edge auto-circuit lacks).

    Args:
        record: the circuit record whose edges give the order (`Edge.auto_circuit` the names).
        scores: auto-circuit's scores by edge name, as `run_eap` returns them.
    Returns:
        `[E]` floats, one per edge of `record`, ready for `scoring.score`. Both embeddings are
        auto-circuit's one "Resid Start", so their edges into a port get the same score.
    """
    return np.array([scores.get(edge.auto_circuit, 0.0) for edge in record.edges])

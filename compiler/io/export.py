"""Export a compiled model to TransformerLens, exactly.

Two layers:

* `export_weights(model)` (numpy only) lays the weights out under the parameter names and shapes
  of TransformerLens' classic property format (`embed.W_E`, `blocks.0.attn.W_Q`, ...), with the
  config arguments and an `ExportInfo` that says what every part means.
* `to_transformer_lens(model)` builds the real model with whichever TransformerLens is
  installed: 4.x through its native route (`TransformerBridge.boot_native` plus
  `convert_tl_checkpoint`), 3.x as a `HookedTransformer` (with an `ExportRouteWarning`: 3.x is
  what SAELens installs). The `ExportInfo` (`compiler.io.export_info`) travels on the result as
  `.export_info`, and a tokenizer over the compiled vocabulary (`compiler.io.hf_tokenizer`) as
  `.tokenizer`, so strings and `to_str_tokens` work.

Both take `projection=W` (`[D, d]`, as in the compiled model's `forward(..., projection=W)`): the
export is then the compressed model, `d_model = d`, with `W` folded into every weight that
writes to or reads from the residual stream.

What makes the export exact rather than approximately equal:

* **Uniform sizes.** TransformerLens has one head count, head width and MLP width; smaller heads
  and MLPs are zero-padded (a zero ReLU unit stays 0, a zero head writes nothing). A model with
  no layers becomes one empty block (TransformerLens 4 cannot build zero blocks).
* **Attention scale.** TransformerLens 4's native attention always divides scores by a scale
  (`sqrt(d_head)` unless `attn_scale` is set). The export sets `attn_scale = 2` and multiplies
  `W_Q` by 2: both steps are exact in floating point, so the scores are the compiled ones. With
  TransformerLens 3, `use_attn_scale=False` and `W_Q` is unchanged.
* **PAD keys are masked through the weights.** The compiled model gives keys holding the PAD id
  no attention. Each exported head has one extra dimension whose query reads the constant `one`
  direction and whose key reads `tokens:PAD` times `-PAD_MASK_LOGIT`, so a PAD key's score drops
  by 10^9 and its softmax weight is exactly 0. Padded batches therefore need no
  `attention_mask` (which TransformerLens 3 ignores for bidirectional models). A compressed
  export keeps the mask only when `W` leaves `one` and `tokens:PAD` on axes of their own
  (`_own_axes`); otherwise `pad_mask_dim` is `None` and batches must hold one length. So does a
  model compiled with a LayerNorm (`_pad_mask_columns` says why); its Hugging Face export
  (`compiler.io.huggingface`) masks padding through `attention_mask` instead.
* **Norms.** A model compiled with `norm=...` exports with TransformerLens' `normalization_type`
  "LN" or "RMS", the norm's gain on every coordinate of `ln1`, `ln2` and `ln_final` and zero
  biases, and its `eps`: TransformerLens' norm computes what the compiled one does.

TransformerLens' default weight processing (centring the unembedding, centring writing weights,
folding layer norms) changes a compiled model's outputs; the returned model warns with
`WeightProcessingWarning` when it is asked to process its weights that way.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import inspect
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from compiler.io.export_info import ExportError, ExportInfo
from compiler.model import oracle
from compiler.model.compiled_model import CompiledModel
from compiler.model.config import AttentionSpec, MLPSpec, NormSpec, layer_module
from compiler.model.dense import config_of_dense_tensors, dense_tensors, fold_projection, tensor_name
from compiler.model.norm import NORM_EPS
from compiler.model.tying import untied
from compiler.model.weights import (
    head_weights,
    mlp_weights,
)
from craft.bases import ONE_NAME, TOKENS_NAME, BasisDirection

__all__ = [
    "ExportError",
    "ExportInfo",
    "ExportRouteWarning",
    "ExportedWeights",
    "WeightProcessingWarning",
    "export_weights",
    "numpy_forward",
    "to_transformer_lens",
    "transformer_lens_version",
]

StateDict = dict[str, np.ndarray]

# Subtracted from the attention score of every key whose token is PAD: exp(-1e9) is 0 in float32,
# and the score of every other key is untouched (its extra term is exactly 0).
PAD_MASK_LOGIT = 1e9
# The residual directions the PAD mask reads: constant 1 at every position / 1 exactly at PAD.
ONE_LABEL = ONE_NAME
PAD_LABEL = str(BasisDirection(TOKENS_NAME, "PAD"))
# TransformerLens' `normalization_type` of each of the compiler's norms.
NORMALIZATION_TYPES = {"layernorm": "LN", "rmsnorm": "RMS"}
# What TransformerLens 4 divides attention scores by; a power of two, so folding it into W_Q
# and dividing it out again are both exact.
TL4_ATTN_SCALE = 2.0
SUPPORTED_LINES = (3, 4)
EXTRA_HINT = "install the export extra: pip install 'tracr-compile[export]'"


class WeightProcessingWarning(UserWarning):
    """TransformerLens was asked to process (centre, fold) the weights of an exported model."""


class ExportRouteWarning(UserWarning):
    """The export took the TransformerLens 3.x route (a `HookedTransformer`), not the 4.x one."""


@dataclasses.dataclass(frozen=True)
class ExportedWeights:
    """`state_dict` under TransformerLens property names, `config` arguments, and `info`."""

    state_dict: StateDict
    config: dict[str, Any]
    info: ExportInfo


# -- the weights (numpy) ------------------------------------------------------------------------


def _blocks(model: CompiledModel) -> tuple[tuple[int | None, int | None], ...]:
    """`(attention sub-layer, MLP sub-layer)` per block; one empty block for a 0-layer model."""
    layers = model.config.layers
    blocks = []
    for start in range(0, len(layers), 2):
        attn = start if isinstance(layers[start], AttentionSpec) else None
        mlp = start + 1 if start + 1 < len(layers) and isinstance(layers[start + 1], MLPSpec) else None
        blocks.append((attn, mlp))
    return tuple(blocks) or ((None, None),)


def _heads(model: CompiledModel, attn: int | None) -> int:
    layer = None if attn is None else model.config.layers[attn]
    return len(layer.heads) if isinstance(layer, AttentionSpec) else 0


def _sizes(model: CompiledModel) -> tuple[int, int, int]:
    """`(n_heads, d_head, d_mlp)` of the compiled heads and MLPs: the largest over the model."""
    n_heads, d_head, d_mlp = 1, 0, 0
    for layer in model.config.layers:
        if isinstance(layer, AttentionSpec):
            n_heads = max(n_heads, len(layer.heads))
            for head in layer.heads:
                d_head = max(d_head, head.w_q.shape[1], head.w_v.shape[1])
        else:
            if layer.w_in.shape[1] and layer.activation != "relu":
                raise ExportError(
                    f"an MLP uses the {layer.activation!r} activation; TransformerLens export "
                    "supports only ReLU MLPs (compile programs, not bilinear/square constructions)"
                )
            d_mlp = max(d_mlp, layer.w_in.shape[1])
    return n_heads, d_head, d_mlp


def _pad_mask_columns(model: CompiledModel) -> tuple[int, int] | None:
    """Residual columns of `one` and `tokens:PAD`, when both exist and no layer writes them; None
    under a LayerNorm: its centring subtracts the stream's mean (about 0.3 in a mid-sized model)
    from `tokens:PAD` too, and the mask's `PAD_MASK_LOGIT` times that, cancelled by its read of
    the norm's zero coordinate only up to float32 rounding of a number near 3e8, would move every
    score by tens (RMSNorm does not centre: a zero stays exactly 0)."""
    labels = model.config.residual_labels
    if ONE_LABEL not in labels or PAD_LABEL not in labels:
        return None
    if model.config.norm is not None and model.config.norm.kind == "layernorm":
        return None
    columns = (labels.index(ONE_LABEL), labels.index(PAD_LABEL))
    for index, layer in enumerate(model.config.layers):
        if isinstance(layer, AttentionSpec):
            writers = [head_weights(model, index, h).w_o for h in range(len(layer.heads))]
        else:
            writers = [mlp_weights(model, index).w_out]
        for w_out in writers:
            if np.any(w_out[:, list(columns)]):
                raise ExportError(
                    f"sub-layer {index} writes to the {ONE_LABEL!r} or {PAD_LABEL!r} residual "
                    "direction, so the exported heads could not mask PAD keys through the weights"
                )
    return columns


def _stages(model: CompiledModel, attn_only: bool) -> tuple[tuple[str, str], ...]:
    """Each compiled residual snapshot with the TransformerLens hook holding the same stream."""
    stages = [(model.stage_names[0], "blocks.0.hook_resid_pre")]
    for index, name in enumerate(model.stage_names[1:]):
        block = index // 2
        after_attention = index % 2 == 0
        hook = "hook_resid_mid" if after_attention and not attn_only else "hook_resid_post"
        stages.append((name, f"blocks.{block}.{hook}"))
    return tuple(stages)


def export_weights(
    model: CompiledModel, *, attn_scale: float | None = None, projection: Any = None
) -> ExportedWeights:
    """Float32 numpy weights named and shaped as TransformerLens' property format.

    Args:
        model: the compiled model.
        attn_scale: the number the target divides attention scores by (`W_Q` is multiplied by
            it); `None` for a target that does not scale (`use_attn_scale=False`).
        projection: `None`, or a `[D, d]` matrix `W` (numpy, JAX or torch): the weights of the
            compressed model that `model.forward(params, ids, projection=W)` runs, with
            `d_model = d` (`compiler.model.dense.fold_projection`).

    Returns:
        `ExportedWeights`: the state dict, the config arguments and the `ExportInfo`.

    Raises:
        ExportError: an MLP's activation is not ReLU, `projection` is not `[D, d]`, or a
            projection of a model with a norm.
    """
    model = untied(model)  # a compiled loop's tied block: one TransformerLens block per iteration
    config = model.config
    norm = config.norm
    if norm is not None and projection is not None:
        raise ExportError(f"the model has a {norm.kind} before every sub-layer, which a residual projection would "
                          "change; export it without projection=, or fold the projection into it first "
                          "(compiler.model.folding.folded_model) and export the folded model")
    width = config.residual_width
    n_heads, d_head, d_mlp = _sizes(model)
    tensors = dense_tensors(model)
    mask_axes = _pad_mask_columns(model)
    if projection is not None:
        projection = _checked_projection(projection, width)
        mask_axes = _own_axes(projection, mask_axes) if mask_axes is not None else None
        tensors = fold_projection(tensors, projection)
    d_model = width if projection is None else int(projection.shape[1])
    mask_dim = d_head if mask_axes is not None else None
    d_head_out = max(1, d_head + (mask_axes is not None))
    q_factor = 1.0 if attn_scale is None else float(attn_scale)
    w_u = tensors[tensor_name("unembed", "w_u")]
    state: StateDict = {
        "embed.W_E": tensors[tensor_name("embed", "token")],
        "pos_embed.W_pos": tensors[tensor_name("embed", "position")],
        "unembed.W_U": w_u,
        "unembed.b_U": np.zeros(w_u.shape[1]),
    }
    blocks = _blocks(model)
    for index, (attn, mlp) in enumerate(blocks):
        w_q = np.zeros((n_heads, d_model, d_head_out))
        w_k, w_v = np.zeros_like(w_q), np.zeros_like(w_q)
        w_o = np.zeros((n_heads, d_head_out, d_model))
        for h in range(_heads(model, attn)):
            assert attn is not None  # _heads is 0 without an attention sub-layer
            q, k, v, o = (tensors[tensor_name(layer_module(attn), f"head_{h}_{part}")] for part in "qkvo")
            w_q[h, :, : q.shape[1]], w_k[h, :, : k.shape[1]] = q, k
            w_v[h, :, : v.shape[1]], w_o[h, : o.shape[0], :] = v, o
        if mask_axes is not None:
            one, pad = mask_axes
            w_q[:, one, mask_dim] = 1.0
            w_k[:, pad, mask_dim] = -PAD_MASK_LOGIT
        prefix = f"blocks.{index}.attn"
        state.update(
            {
                f"{prefix}.W_Q": w_q * q_factor,
                f"{prefix}.W_K": w_k,
                f"{prefix}.W_V": w_v,
                f"{prefix}.W_O": w_o,
                f"{prefix}.b_Q": np.zeros((n_heads, d_head_out)),
                f"{prefix}.b_K": np.zeros((n_heads, d_head_out)),
                f"{prefix}.b_V": np.zeros((n_heads, d_head_out)),
                f"{prefix}.b_O": np.zeros(d_model),
            }
        )
        if norm is not None:
            state.update(_norm_weights(f"blocks.{index}.ln1", norm.kind, norm.scale, d_model))
            if d_mlp:
                state.update(_norm_weights(f"blocks.{index}.ln2", norm.kind, norm.scale, d_model))
        if d_mlp:
            w_in, w_out = np.zeros((d_model, d_mlp)), np.zeros((d_mlp, d_model))
            if mlp is not None:
                hidden = tensors[tensor_name(layer_module(mlp), "w_in")]
                w_in[:, : hidden.shape[1]] = hidden
                w_out[: hidden.shape[1]] = tensors[tensor_name(layer_module(mlp), "w_out")]
            state.update(
                {
                    f"blocks.{index}.mlp.W_in": w_in,
                    f"blocks.{index}.mlp.b_in": np.zeros(d_mlp),
                    f"blocks.{index}.mlp.W_out": w_out,
                    f"blocks.{index}.mlp.b_out": np.zeros(d_model),
                }
            )
    if norm is not None:
        state.update(_norm_weights("ln_final", norm.kind, norm.scale, d_model))
    label = getattr(model.program, "label", None)
    cfg = {
        "n_layers": len(blocks),
        "d_model": d_model,
        "n_ctx": config.max_seq_len + 1,
        "d_head": d_head_out,
        "n_heads": n_heads,
        # 0, not None: TransformerLens fills a missing d_mlp with 4 * d_model.
        "d_mlp": d_mlp,
        "d_vocab": config.vocab_size,
        "d_vocab_out": int(w_u.shape[1]),
        "act_fn": "relu",
        "normalization_type": None if norm is None else NORMALIZATION_TYPES[norm.kind],
        "eps": NORM_EPS if norm is None else norm.eps,
        "attn_only": not d_mlp,
        "positional_embedding_type": "standard",
        "use_attn_scale": attn_scale is not None,
        "attn_scale": -1.0 if attn_scale is None else float(attn_scale),
        "attention_dir": "causal" if config.causal else "bidirectional",
        # The attached tokenizer puts BOS in front of every string (compiler.io.hf_tokenizer).
        "default_prepend_bos": True,
        "model_name": f"tracr-compile/{label}" if isinstance(label, str) else "tracr-compile",
        "original_architecture": "tracr-compile",
    }
    info = ExportInfo(
        residual_labels=config.residual_labels,
        input_encoder=model.input_encoder,
        output_encoder=model.output_encoder,
        numerical_output=config.numerical_output,
        causal=config.causal,
        n_heads=n_heads,
        real_heads=tuple(_heads(model, attn) for attn, _ in blocks),
        block_sublayers=blocks,
        stages=_stages(model, attn_only=not d_mlp),
        pad_mask_dim=mask_dim,
        attn_scale=attn_scale,
        projection=None if projection is None else projection.astype(np.float32),
        program_label=label if isinstance(label, str) else None,
    )
    arrays = {name: np.asarray(value, np.float32) for name, value in state.items()}
    return ExportedWeights(arrays, cfg, info)


def _norm_weights(prefix: str, kind: str, scale: float, width: int) -> StateDict:
    """A norm site's TransformerLens weights: the gain `scale` on every coordinate (`.w`) and,
    for LayerNorm, a zero bias (`.b`)."""
    found = {f"{prefix}.w": np.full(width, scale)}
    if kind == "layernorm":
        found[f"{prefix}.b"] = np.zeros(width)
    return found


def _checked_projection(projection: Any, width: int) -> np.ndarray:
    """`projection` as a float64 `[D, d]` numpy array; `ExportError` for another shape."""
    if hasattr(projection, "detach"):
        projection = projection.detach().cpu().numpy()
    matrix = np.asarray(projection, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != width or matrix.shape[1] < 1:
        raise ExportError(
            f"projection must be a [D, d] matrix with D = {width} (the residual width) and d >= 1, "
            f"as passed to forward(..., projection=W); got shape {matrix.shape}"
        )
    if not np.all(np.isfinite(matrix)):
        raise ExportError("projection holds NaN or infinite entries")
    return matrix


def _own_axes(projection: np.ndarray, columns: tuple[int, int]) -> tuple[int, int] | None:
    """The axes of the compressed stream that residual columns `columns` (`one`, `tokens:PAD`)
    are written to, when `projection` writes each as exactly 1 on an axis no other column
    touches: reading it back through `projection.T` is then exact, so the PAD mask (1e9 times
    the `tokens:PAD` reading) adds exactly 0 to non-PAD keys. None otherwise."""
    axes = []
    for column in columns:
        nonzero = np.flatnonzero(projection[column])
        if len(nonzero) != 1 or projection[column, nonzero[0]] != 1.0:
            return None
        if np.count_nonzero(projection[:, nonzero[0]]) != 1:
            return None
        axes.append(int(nonzero[0]))
    return axes[0], axes[1]


def numpy_forward(state: StateDict, cfg: dict[str, Any], ids: np.ndarray) -> np.ndarray:
    """Logits `[batch, T, d_vocab_out]` of the exported architecture, computed in float64: a check
    of an export without TransformerLens.

    The state's weights are read back into the project's flat tensors (each head's slice of the
    padded `W_Q`, divided by the attention scale `cfg` sets) and run by the test oracle
    (`compiler.model.oracle`) without any PAD masking of its own, so padded batches are masked
    only by the export's weights, as in TransformerLens.

    Raises:
      ExportError: a non-zero bias (the compiled models have none; this check does not add them).
    """
    nonzero = [name for name, value in state.items() if (".b_" in name or name.endswith(".b")) and np.any(value)]
    if nonzero:
        raise ExportError(f"numpy_forward checks bias-free exports; {nonzero[0]} is not zero")
    norm = _read_norm(state, cfg)
    scale = 1.0
    if cfg.get("use_attn_scale", True):
        scale = cfg["attn_scale"] if cfg.get("attn_scale", -1.0) > 0 else float(np.sqrt(cfg["d_head"]))
    tensors = {tensor_name("embed", "token"): state["embed.W_E"], tensor_name("embed", "position"): state["pos_embed.W_pos"],
               tensor_name("unembed", "w_u"): state["unembed.W_U"]}
    for block in range(cfg["n_layers"]):
        attention, mlp = layer_module(2 * block), layer_module(2 * block + 1)
        heads = {"q": state[f"blocks.{block}.attn.W_Q"] / scale, "k": state[f"blocks.{block}.attn.W_K"],
                 "v": state[f"blocks.{block}.attn.W_V"], "o": state[f"blocks.{block}.attn.W_O"]}
        for part, stack in heads.items():
            for h, matrix in enumerate(stack):
                tensors[tensor_name(attention, f"head_{h}_{part}")] = matrix
        if not cfg["attn_only"]:
            tensors[tensor_name(mlp, "w_in")] = state[f"blocks.{block}.mlp.W_in"]
            tensors[tensor_name(mlp, "w_out")] = state[f"blocks.{block}.mlp.W_out"]
    config, params = config_of_dense_tensors(tensors, pad_id=-1, causal=cfg["attention_dir"] == "causal",
                                             numerical_output=False, activations={}, dtype=np.float64, norm=norm)
    return oracle.forward(config, params, np.asarray(ids), dtype=np.float64)


def _read_norm(state: StateDict, cfg: dict[str, Any]) -> NormSpec | None:
    """The norm of an export, read from its config and its sites' gains (one value everywhere,
    as the compiler writes them); None without one.

    Raises:
      ExportError: gains that differ (a norm this check does not model).
    """
    kind = {tl: ours for ours, tl in NORMALIZATION_TYPES.items()}.get(cfg.get("normalization_type") or "")
    if kind is None:
        return None
    gains = np.concatenate([value.ravel() for name, value in state.items() if name.endswith((".ln1.w", ".ln2.w"))
                            or name == "ln_final.w"])
    if not len(gains) or np.any(gains != gains[0]):
        raise ExportError("numpy_forward checks exports whose norm sites share one gain")
    return NormSpec(kind, float(gains[0]), float(cfg["eps"]), anchor=float("nan"), spread=float("nan"))


# -- the real TransformerLens model -------------------------------------------------------------


def transformer_lens_version() -> str:
    """The installed TransformerLens version; `ImportError` naming the extra when absent."""
    try:
        return importlib.metadata.version("transformer-lens")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError(f"to_transformer_lens needs torch and transformer-lens; {EXTRA_HINT}") from None


def _major(version: str) -> int:
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else -1


def to_transformer_lens(model: CompiledModel, device: str = "cpu", *, projection: Any = None) -> Any:
    """The compiled model as a TransformerLens model, for the installed TransformerLens.

    4.x: a `TransformerBridge` booted natively; 3.x: a `HookedTransformer`, announced with an
    `ExportRouteWarning` (SAELens installs the 3.x line over the `export` extra's 4.x). Both
    compute the compiled logits, residual streams and attention patterns on padded and unpadded
    id batches (no `attention_mask` needed), and carry a tokenizer over the compiled vocabulary
    (`.tokenizer`: `to_tokens("1 2 3")`, `to_str_tokens(ids)`, string inputs).

    Args:
        model: the compiled model.
        device: the torch device of the weights.
        projection: `None`, or a `[D, d]` residual projection `W`: export the compressed model
            `model.forward(params, ids, projection=W)` runs, with `d_model = d`
            (`compiler.model.dense.fold_projection`); `export_info.decompress` maps its residuals back to the labels.

    Returns:
        The TransformerLens model in eval mode, with `.export_info` (an `ExportInfo` whose
        `route` names the class and version used).

    Raises:
        ImportError: torch or transformer-lens is missing (the message names the extra).
        ExportError: an unsupported TransformerLens version, a model it cannot express, or a
            projection of the wrong shape.
    """
    version = transformer_lens_version()
    line = _major(version)
    if line not in SUPPORTED_LINES:
        raise ExportError(
            f"TransformerLens {version} is installed; to_transformer_lens supports the 3.x "
            f"(HookedTransformer) and 4.x (TransformerBridge) lines; {EXTRA_HINT}"
        )
    try:
        importlib.import_module("torch")  # fail early, with the hint below
    except ImportError:
        raise ImportError(f"to_transformer_lens needs torch; {EXTRA_HINT}") from None
    from compiler.io.hf_tokenizer import build_tokenizer

    label = getattr(model.program, "label", None)
    tokenizer = build_tokenizer(model.input_encoder, f"tracr-compile/{label}" if isinstance(label, str) else "tracr-compile")
    if line == 4:
        exported = export_weights(model, attn_scale=TL4_ATTN_SCALE, projection=projection)
        tl_model = _boot_native(exported, tokenizer, device)
        guarded = ("process_weights", "enable_compatibility_mode")
        route = f"TransformerLens {version}: TransformerBridge.boot_native"
    else:
        exported = export_weights(model, attn_scale=None, projection=projection)
        tl_model = _hooked_transformer(exported, tokenizer, device)
        guarded = ("load_and_process_state_dict", "process_weights_")
        route = f"TransformerLens {version}: HookedTransformer"
        warnings.warn(
            f"TransformerLens {version} is installed, so the export is a HookedTransformer (the 3.x "
            "route, which SAELens needs); the export extra's 4.x line gives a TransformerBridge. "
            "Both compute the same numbers; export_info.route records the route taken",
            ExportRouteWarning,
            stacklevel=2,
        )
    # An MLP's input gets its own hook (`blocks.<b>.hook_mlp_in`), as the circuit records name it:
    # a gradient there is the MLP's alone, where `hook_resid_mid`'s also holds the skip path's.
    # An attention-only model has no MLP input to hook (TransformerLens 3 refuses the switch).
    if not getattr(tl_model.cfg, "attn_only", False):
        tl_model.set_use_hook_mlp_in(True)
    info = dataclasses.replace(exported.info, transformer_lens_version=version, route=route)
    object.__setattr__(tl_model, "export_info", info)
    for name in guarded:
        _guard_processing(tl_model, name)
    return tl_model.eval()


def _tensors(state: StateDict, device: str) -> dict[str, Any]:
    import torch

    return {name: torch.tensor(value, device=device) for name, value in state.items()}


def _boot_native(exported: ExportedWeights, tokenizer: Any, device: str) -> Any:
    """TransformerLens 4: `TransformerBridge.boot_native` plus the legacy checkpoint converter."""
    try:
        # By module attribute: the names exist on the 4.x line only, which the type check may not see.
        transformer_lens = importlib.import_module("transformer_lens")
        TransformerBridge, TransformerBridgeConfig = transformer_lens.TransformerBridge, transformer_lens.TransformerBridgeConfig
        convert_tl_checkpoint = importlib.import_module("transformer_lens.utilities.tl_checkpoint_conversion").convert_tl_checkpoint

        boot_native = TransformerBridge.boot_native
    except (ImportError, AttributeError) as error:
        raise ExportError(
            f"TransformerLens {transformer_lens_version()} lacks the native route "
            f"(TransformerBridge.boot_native, convert_tl_checkpoint: {error}); the export needs "
            f"TransformerLens 4.3 or later on the 4.x line, or 3.x; {EXTRA_HINT}"
        ) from None
    cfg = TransformerBridgeConfig(**exported.config, init_weights=False)
    bridge = boot_native(cfg, tokenizer=tokenizer, device=device, model_name=exported.config["model_name"])
    bridge.load_state_dict(convert_tl_checkpoint(_tensors(exported.state_dict, device), bridge.cfg))
    if exported.config["attn_only"]:
        # The native model writes 4 * d_model into a zero d_mlp, MLPs or not; say what is there.
        bridge.cfg.d_mlp = 0
    return bridge


def _hooked_transformer(exported: ExportedWeights, tokenizer: Any, device: str) -> Any:
    """TransformerLens 3: a `HookedTransformer` with the weights loaded unprocessed."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    with warnings.catch_warnings():
        # 3.x announces HookedTransformer's removal in 4.0; the 4.x route is `_boot_native`.
        warnings.filterwarnings("ignore", "HookedTransformer is deprecated", DeprecationWarning)
        hooked = HookedTransformer(HookedTransformerConfig(**exported.config, device=device), tokenizer=tokenizer)
    missing, unexpected = hooked.load_state_dict(_tensors(exported.state_dict, device), strict=False)
    missing = [name for name in missing if not name.endswith((".mask", ".IGNORE"))]
    if missing or unexpected:
        raise ExportError(
            f"TransformerLens expects other parameters: missing {missing}, unexpected {unexpected}"
        )
    return hooked


# Processing options that change a model without layer norm: centring the unembedding shifts
# every logit (and zeroes a numerical output's single column); centring writing weights moves
# the residual stream off the compiled labels.
_HARMFUL_OPTIONS = ("center_unembed", "center_writing_weights")


def _guard_processing(tl_model: Any, name: str) -> None:
    """Wrap `tl_model.<name>` so processing that changes outputs warns first."""
    method: Callable[..., Any] | None = getattr(type(tl_model), name, None)
    if method is None:
        return
    signature = inspect.signature(method)
    bound_method = getattr(tl_model, name)

    @functools.wraps(bound_method)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(tl_model, *args, **kwargs)
        bound.apply_defaults()
        options = bound.arguments
        on = [o for o in _HARMFUL_OPTIONS if options.get(o) and not options.get("no_processing")]
        if on:
            warnings.warn(
                f"{name}({', '.join(f'{o}=True' for o in on)}) changes the exported compiled model: "
                "its logits and residual stream will no longer equal the compiled model's; pass "
                + ("no_processing=True" if "no_processing" in options else ", ".join(f"{o}=False" for o in on)),
                WeightProcessingWarning,
                stacklevel=2,
            )
        return bound_method(*args, **kwargs)

    object.__setattr__(tl_model, name, guarded)


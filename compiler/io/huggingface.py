"""Export a compiled model as an ordinary Hugging Face GPT-2 checkpoint.

`to_huggingface(model, folder)` writes `config.json`, `model.safetensors`, the tokenizer files
and a model card (`README.md`) that `transformers.AutoModelForCausalLM.from_pretrained` and
`AutoTokenizer.from_pretrained` load with no import of this project, so every tool built on
Hugging Face models (nnsight's `LanguageModel`, TransformerLens' loaders, vLLM, SAELens' model
loading) sees a plain GPT-2.

GPT-2 has a LayerNorm before every attention and MLP sub-layer and before the unembedding, so
the model must be compiled with `norm="layernorm"` (`compiler.model.norm`): its norm sites are
the checkpoint's `ln_1`, `ln_2` and `ln_f`, each with the norm's gain on every coordinate and a
zero bias. What makes the checkpoint compute the compiled model:

* **Uniform sizes.** GPT-2 has one head count and one head width with `n_head * head_dim =
  n_embd`, and one MLP width: the residual stream is padded with zero coordinates to
  `n_embd`, smaller heads and MLPs with zero units (the norm's gain is recomputed for the wider
  stream, `compiler.model.norm.padded_norm`: zeros change neither sum nor sum of squares).
* **Scores as compiled.** GPT-2 divides scores by `sqrt(head_dim)`; `head_dim` is a power of 4
  and `W_Q` is multiplied by its square root, a power of two, so both steps are exact in floating
  point and the scores are the compiled `q . k` (tools that re-implement GPT-2's attention, such as
  TransformerLens' bridge, compute the same). Every bias is zero (the compiler's biases are reads
  of the constant `one` coordinate).
* **Padding and direction.** Padding is masked through `attention_mask` (the tokenizer pads on
  the right and returns it), as the compiled model masks PAD keys; a bidirectional program
  sets `is_causal: false` (transformers 5.2 or later reads it and runs the blocks without the
  causal mask).
* **One vocabulary.** The checkpoint's tokens are the input tokens (with the compiled model's
  ids: BOS and PAD after the vocabulary), then every output value that is no input token, then
  `<none>`. The unembedding writes each output value's logit to its token, `<none>` reads 1/2
  off the anchor coordinate (the compiled decoder's empty threshold) and every other token -1,
  so the argmax token at each position is the program's output there, None included. A
  numerical program's output is the logit of the token `<value>` (`VALUE_TOKEN`).

* **Compressed models.** `to_huggingface(model, folder, projection=W)` folds a residual
  projection of the compiled coordinates into the weights (`compiler.model.folding`): the
  checkpoint's stream is the compressed one (one coordinate more, for a mean of zero) plus the
  anchor's two coordinates, its anchor sized afresh, so the norms stay a known scale there too.

The checkpoint's norms keep each divisor within `config.json`'s `tracr_compile.norm_spread` of
its gain, so its decoded outputs equal the compiled model's (tests/compiler/io/test_huggingface.py
checks every library program in a process that never imports this project).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import shutil
import tempfile
from collections.abc import Hashable, Sequence
from typing import Any, cast

import numpy as np
import safetensors.numpy

from compiler.io.export_info import ExportError
from compiler.model.compiled_model import CompiledModel
from compiler.model.config import AttentionSpec, MLPSpec
from compiler.model.encoders import OutputEncoder
from compiler.model.folding import folded_model
from compiler.model.norm import ANCHOR, padded_norm
from compiler.model.tying import untied
from compiler.model.weights import head_weights, mlp_weights, position_embedding, token_embedding, unembedding

__all__ = ["NONE_TOKEN", "VALUE_TOKEN", "HuggingFaceExport", "check_folder", "expected_outputs", "hugging_face_vocabulary", "input_texts",
           "read_config", "run_in_fresh_process", "to_huggingface"]

NONE_TOKEN = "<none>"  # the argmax token where the program's output is None
VALUE_TOKEN = "<value>"  # a numerical program's output is this token's logit
NONE_LOGIT = 0.5  # the compiled decoder's empty threshold (compiler.model.encoders.EMPTY_THRESHOLD)
OTHER_LOGIT = -1.0  # tokens that are no output value: never the argmax
# The files an export writes; an existing folder holding only these is replaced by a new export.
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
         "README.md")


@dataclasses.dataclass(frozen=True)
class HuggingFaceExport:
    """What `to_huggingface` wrote: the folder, the token texts by id, and where each output
    value's logit went (`output_ids[c]`: the token of output column `c`)."""

    folder: pathlib.Path
    tokens: tuple[str, ...]
    output_ids: tuple[int, ...]
    n_embd: int
    n_head: int
    head_dim: int
    n_inner: int
    n_layer: int


def _word(text: str) -> str:
    """`text` without whitespace: the tokenizer splits its input on whitespace, so a token's
    text must hold none (`(0, 1)` becomes `(0,1)`)."""
    return "".join(text.split())


def _texts(items: Sequence[Hashable]) -> tuple[str, ...]:
    """`str` of every item, or `repr` of every item when two `str`s collide, whitespace removed.

    Raises:
      ExportError: two items alike under `repr` too.
    """
    texts = tuple(_word(str(item)) for item in items)
    if len(set(texts)) < len(texts):
        texts = tuple(_word(repr(item)) for item in items)
    if len(set(texts)) < len(texts):
        alike = sorted({text for text in texts if texts.count(text) > 1})
        raise ExportError(f"tokens and output values share the text {alike[0]!r} under both str and repr; give "
                          "them distinct printed forms")
    return texts


def _key(item: Hashable) -> tuple[type, Hashable]:
    """Items are one token when they are equal and of one type (1, 1.0 and True stay apart)."""
    return type(item), item


def hugging_face_vocabulary(model: CompiledModel) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """`(token texts by id, token id of each output column)` of `model`'s checkpoint (module
    docstring): the input tokens in the compiled ids, the output values that are no input token,
    then `<none>` (categorical) or `<value>` (numerical).

    Raises:
      ExportError: texts that collide (with each other or with `<none>` / `<value>`).
    """
    encoder = model.input_encoder
    inputs: list[Hashable] = [*encoder.vocab, encoder.bos, encoder.pad]
    assert [encoder.token_to_id[t] for t in inputs] == list(range(len(inputs)))
    output = model.output_encoder
    assert isinstance(output, OutputEncoder)
    values = list(output.values or ())
    known = {_key(item): i for i, item in enumerate(inputs)}
    extra = [v for v in dict.fromkeys(values, None) if _key(v) not in known]
    items = [*inputs, *extra]
    texts = _texts(items)
    special = VALUE_TOKEN if output.numerical else NONE_TOKEN
    if special in texts:
        raise ExportError(f"a token or output value prints as {special!r}, the checkpoint's own token for "
                          f"{'the numerical output' if output.numerical else 'None'}; rename it")
    index = {_key(item): i for i, item in enumerate(items)}
    output_ids = (len(items),) if output.numerical else tuple(index[_key(v)] for v in values)
    return (*texts, special), output_ids


def _check(model: CompiledModel) -> None:
    norm = model.config.norm
    if norm is None or norm.kind != "layernorm":
        found = "no norm" if norm is None else f"a {norm.kind}"
        raise ExportError(f"a GPT-2 checkpoint has a LayerNorm before every sub-layer, and this model has {found}; "
                          "compile it with compile_rasp(..., norm='layernorm') (CLI: --norm layernorm)")
    if not isinstance(model.output_encoder, OutputEncoder):
        raise ExportError("the model computes several programs; a checkpoint's argmax names one output per "
                          "position, so export each program compiled on its own")
    for index, layer in enumerate(model.config.layers):
        if isinstance(layer, MLPSpec) and layer.w_in.shape[1] and layer.activation != "relu":
            raise ExportError(f"sub-layer {index} has a {layer.activation!r} activation; the checkpoint's MLPs are ReLU")


def check_folder(folder: pathlib.Path) -> None:
    """Refuse, before any work, a folder that cannot take the export.

    Raises:
      ExportError: the path is a file, its parent is missing or not a folder, or it is a folder
        holding other files than an export's.
    """
    if folder.exists() and not folder.is_dir():
        raise ExportError(f"{folder} is a file; give a folder for the checkpoint")
    parent = folder.parent
    if not parent.is_dir():
        raise ExportError(f"{folder}: its parent {parent} is not a folder; create it first")
    if folder.is_dir():
        others = sorted(p.name for p in folder.iterdir() if p.name not in FILES)
        if others:
            raise ExportError(f"{folder} holds other files ({', '.join(others[:3])}); give a new or empty folder, "
                              "or one holding only an earlier export")


def _padded(matrix: np.ndarray, rows: int, cols: int) -> np.ndarray:
    out = np.zeros((rows, cols), np.float64)
    out[: matrix.shape[0], : matrix.shape[1]] = matrix
    return out


def _sizes(model: CompiledModel) -> tuple[int, int, int, int]:
    """`(n_head, head_dim, n_inner, n_layer)` holding every head, MLP and sub-layer of `model`,
    with `n_head * head_dim` at least the residual width."""
    config = model.config
    heads = [(i, h) for i, layer in enumerate(config.layers) if isinstance(layer, AttentionSpec)
             for h in range(len(layer.heads))]
    n_head = max([len(layer.heads) for layer in config.layers if isinstance(layer, AttentionSpec)], default=0) or 1
    widths = [max(w.w_q.shape[1], w.w_v.shape[1]) for w in (head_weights(model, i, h) for i, h in heads)]
    needed = max(max(widths, default=1), math.ceil(config.residual_width / n_head))
    head_dim = 4 ** math.ceil(math.log(needed, 4) - 1e-9) if needed > 1 else 4  # a power of 4: sqrt is a power of 2
    n_inner = max([layer.w_in.shape[1] for layer in config.layers if isinstance(layer, MLPSpec)], default=0) or 1
    return n_head, head_dim, n_inner, max(1, (len(config.layers) + 1) // 2)


def _tensors(model: CompiledModel, tokens: int, output_ids: Sequence[int]) -> tuple[dict[str, np.ndarray], dict]:
    """The checkpoint's tensors (GPT-2's names and layouts) and its size arguments."""
    config = model.config
    norm = config.norm
    assert norm is not None
    n_head, head_dim, n_inner, n_layer = _sizes(model)
    n_embd = n_head * head_dim
    gain = padded_norm(norm, n_embd)
    embed = token_embedding(model)
    pad_row = embed[model.input_encoder.pad_id]
    wte = np.zeros((tokens, n_embd))
    wte[:, : config.residual_width] = pad_row  # an output-only token reads as PAD
    wte[: len(embed), : config.residual_width] = embed
    site = {"weight": np.full(n_embd, gain.scale), "bias": np.zeros(n_embd)}
    found: dict[str, np.ndarray] = {
        "transformer.wte.weight": wte,
        "transformer.wpe.weight": _padded(position_embedding(model), config.max_seq_len + 1, n_embd),
    }
    for block in range(n_layer):
        prefix = f"transformer.h.{block}"
        qkv, proj = np.zeros((n_embd, 3 * n_embd)), np.zeros((n_embd, n_embd))
        attn = 2 * block
        if attn < len(config.layers):
            layer = config.layers[attn]
            assert isinstance(layer, AttentionSpec)
            for h in range(len(layer.heads)):
                weights = head_weights(model, attn, h)
                # GPT-2 divides scores by sqrt(head_dim), a power of two: W_Q times it is undone exactly
                for part, matrix in enumerate((weights.w_q * math.sqrt(head_dim), weights.w_k, weights.w_v)):
                    first = part * n_embd + h * head_dim  # c_attn's columns: all queries, keys, values
                    qkv[:, first : first + head_dim] = _padded(matrix, n_embd, head_dim)
                proj[h * head_dim : (h + 1) * head_dim] = _padded(weights.w_o, head_dim, n_embd)
        fc, out = np.zeros((n_embd, n_inner)), np.zeros((n_inner, n_embd))
        if attn + 1 < len(config.layers):
            mlp = mlp_weights(model, attn + 1)
            fc, out = _padded(mlp.w_in, n_embd, n_inner), _padded(mlp.w_out, n_inner, n_embd)
        found.update({
            **{f"{prefix}.ln_1.{name}": value for name, value in site.items()},
            f"{prefix}.attn.c_attn.weight": qkv, f"{prefix}.attn.c_attn.bias": np.zeros(3 * n_embd),
            f"{prefix}.attn.c_proj.weight": proj, f"{prefix}.attn.c_proj.bias": np.zeros(n_embd),
            **{f"{prefix}.ln_2.{name}": value for name, value in site.items()},
            f"{prefix}.mlp.c_fc.weight": fc, f"{prefix}.mlp.c_fc.bias": np.zeros(n_inner),
            f"{prefix}.mlp.c_proj.weight": out, f"{prefix}.mlp.c_proj.bias": np.zeros(n_embd),
        })
    found.update({f"transformer.ln_f.{name}": value for name, value in site.items()})
    anchor = config.residual_labels.index(ANCHOR)
    head = np.zeros((tokens, n_embd))
    head[:, anchor] = OTHER_LOGIT / norm.anchor
    unembed = unembedding(model)
    for column, token in enumerate(output_ids):
        head[token] = 0.0
        head[token, : config.residual_width] = unembed[:, column]
    if not config.numerical_output:
        head[tokens - 1] = 0.0
        head[tokens - 1, anchor] = NONE_LOGIT / norm.anchor
    found["lm_head.weight"] = head
    sizes = {"n_embd": n_embd, "n_head": n_head, "head_dim": head_dim, "n_inner": n_inner, "n_layer": n_layer,
             "norm": gain}
    return {name: np.ascontiguousarray(value, np.float32) for name, value in found.items()}, sizes


def _card(model: CompiledModel, name: str, texts: Sequence[str], numerical: bool) -> str:
    """The model card: what the checkpoint computes and how to read it (three lines)."""
    label = getattr(model.program, "label", None) or name
    read = (f'logits[0, :, tokenizer.convert_tokens_to_ids("{VALUE_TOKEN}")]  # the value at each position'
            if numerical else "[tokenizer.convert_ids_to_tokens(int(i)) for i in logits[0].argmax(-1)]  "
                              f"# the output at each position ({NONE_TOKEN}: None)")
    example = " ".join(texts[: min(3, len(model.input_encoder.vocab))])
    return f"""# {name}

A transformer compiled by tracr-compile from the RASP program `{label}`: its weights compute the
program exactly ({'causal' if model.config.causal else 'bidirectional'} attention, inputs of up to
{model.config.max_seq_len} tokens, vocabulary {' '.join(texts[: len(model.input_encoder.vocab)])}).
It is an ordinary GPT-2 checkpoint:

```python
from transformers import AutoModelForCausalLM, AutoTokenizer
model, tokenizer = AutoModelForCausalLM.from_pretrained("PATH"), AutoTokenizer.from_pretrained("PATH")
batch = tokenizer(["{example}"], return_tensors="pt"); logits = model(**batch).logits
{read}
```

Position 0 is the BOS token the tokenizer puts first; pass the tokenizer's `attention_mask`
with padded batches.
"""


def to_huggingface(model: CompiledModel, folder: str | os.PathLike, *, name: str | None = None,
                   projection: np.ndarray | None = None) -> HuggingFaceExport:
    """Write `model` as a Hugging Face GPT-2 checkpoint into `folder` (module docstring).

    Args:
      model: a model compiled with `norm="layernorm"`, of one program.
      folder: where the checkpoint goes: a new folder, an empty one or one holding an earlier
        export (replaced as a whole: the files are written beside it and moved in at once).
      name: the checkpoint's name (`name_or_path` of its tokenizer, the card's title); default
        `tracr-compile/<program label>`.
      projection: None, or a residual projection `W` (`[D0, d]`, over the compiled coordinates,
        all but the norm's last three; `compression.analytic.residual_structure(model)` analyses
        them) to fold in: the checkpoint is the compressed model, its stream d + 3 wide before
        padding (`compiler.model.folding`).
    Returns:
      The `HuggingFaceExport` record (folder, token texts, output token ids, sizes).
    Raises:
      ExportError: a model without a LayerNorm, of several programs or with a non-ReLU MLP;
        texts that collide; a folder that cannot take the checkpoint (checked before any work).
      CompilerError: a projection of the wrong shape (`folded_model`).
      ImportError: `transformers` is missing (the `export` extra).
    """
    target = pathlib.Path(folder)
    _check(model)
    check_folder(target)
    try:
        from transformers import GPT2Config

        from compiler.io.hf_tokenizer import word_level_tokenizer
    except ImportError:
        raise ImportError("to_huggingface needs transformers; install the export extra: pip install "
                          "'tracr-compile[export]'") from None
    label = getattr(model.program, "label", None)
    name = name or (f"tracr-compile/{label}" if isinstance(label, str) else "tracr-compile")
    flat = untied(model) if projection is None else folded_model(model, projection)  # a loop: a block per iteration
    texts, output_ids = hugging_face_vocabulary(flat)
    tensors, sizes = _tensors(flat, len(texts), output_ids)
    encoder, numerical = flat.input_encoder, flat.config.numerical_output
    gain = sizes.pop("norm")
    # GPT2Config takes the extra `tracr_compile`, `is_causal` and `n_ctx` as attributes; `n_ctx` (the
    # context length, as GPT-2's own configs spell it beside `n_positions`) is what TransformerLens 3
    # reads when it converts a GPT-2 config.
    positions = flat.config.max_seq_len + 1
    arguments: dict[str, Any] = dict(
        vocab_size=len(texts), n_positions=positions, n_ctx=positions, n_embd=sizes["n_embd"],
        n_layer=sizes["n_layer"], n_head=sizes["n_head"], n_inner=sizes["n_inner"], activation_function="relu",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=gain.eps, scale_attn_weights=True,
        bos_token_id=encoder.bos_id, eos_token_id=encoder.pad_id, pad_token_id=encoder.pad_id,
        tie_word_embeddings=False, is_causal=bool(flat.config.causal), architectures=["GPT2LMHeadModel"],
        tracr_compile={
            "program": label if isinstance(label, str) else None,
            "output": "numerical" if numerical else "categorical",
            "value_token": VALUE_TOKEN if numerical else None, "none_token": None if numerical else NONE_TOKEN,
            "norm_gain": gain.scale, "norm_anchor": gain.anchor, "norm_spread": gain.spread,
            "residual_labels": list(flat.config.residual_labels),
        },
    )
    config = GPT2Config(**arguments)
    tokenizer = word_level_tokenizer(texts, encoder.bos_id, encoder.pad_id, encoder.max_seq_len + 1, name)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    umask = os.umask(0)
    os.umask(umask)
    try:
        config.to_json_file(str(staging / "config.json"))
        safetensors.numpy.save_file(tensors, str(staging / "model.safetensors"), metadata={"format": "pt"})
        tokenizer.save_pretrained(str(staging))
        (staging / "README.md").write_text(_card(flat, name, texts, numerical), encoding="utf-8")
        for path in staging.iterdir():  # the permissions of new files, not mkdtemp's private ones
            path.chmod(0o666 & ~umask)
        staging.chmod(0o777 & ~umask)
        _move_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return HuggingFaceExport(target, tuple(texts), tuple(output_ids), sizes["n_embd"], sizes["n_head"],
                             sizes["head_dim"], sizes["n_inner"], sizes["n_layer"])


def _move_in(staging: pathlib.Path, target: pathlib.Path) -> None:
    """Put the finished `staging` folder at `target` (an earlier export there is moved aside
    first and removed after, so `target` always holds one whole export or none)."""
    if not target.exists():
        os.replace(staging, target)
        return
    aside = target.with_name(f".{target.name}.old-{os.getpid()}")
    os.replace(target, aside)
    try:
        os.replace(staging, target)
    except BaseException:
        os.replace(aside, target)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def read_config(folder: str | os.PathLike) -> dict[str, Any]:
    """The `tracr_compile` entry of an exported checkpoint's `config.json`."""
    return json.loads((pathlib.Path(folder) / "config.json").read_text(encoding="utf-8"))["tracr_compile"]


def input_texts(export: HuggingFaceExport, inputs: Sequence[Sequence[Hashable]], model: CompiledModel) -> list[str]:
    """Each input (a token list, BOS not included) as the checkpoint's tokenizer reads it."""
    ids = model.input_encoder.token_to_id
    return [" ".join(export.tokens[ids[token]] for token in tokens) for tokens in inputs]


def expected_outputs(export: HuggingFaceExport, model: CompiledModel, inputs: Sequence[Sequence[Hashable]]) -> list:
    """What the checkpoint must give on each input, from the compiled model: the token text of
    each position's decoded value (`<none>` for None), or the numbers of a numerical output."""
    decoded = cast(list[list[Any]], model.apply_batch([[model.input_encoder.bos, *tokens] for tokens in inputs]))
    output = model.output_encoder
    assert isinstance(output, OutputEncoder)
    if output.numerical:
        return [[float(v) for v in row[1:]] for row in decoded]
    texts = {_key(value): export.tokens[token] for value, token in zip(output.values or (), export.output_ids)}
    return [[NONE_TOKEN if v is None else texts[_key(v)] for v in row[1:]] for row in decoded]


def run_in_fresh_process(jobs: Sequence[tuple[str | os.PathLike, Sequence[str], str | None]]) -> tuple[list, list[str]]:
    """Run exported checkpoints on inputs in one Python process that imports only torch and
    transformers (`compiler.io.hf_parity`), as a user without this project would.

    Args:
      jobs: `(folder, input texts, value token)` per checkpoint (the value token of a numerical
        output, else None).
    Returns:
      `(outputs, project_modules)`: per job and input the argmax token texts after BOS (or the
      value token's logits), and the modules of this project the process imported (empty).
    Raises:
      ExportError: the process failed (its error output in the message).
    """
    import subprocess
    import sys

    from compiler.io import hf_parity

    with tempfile.TemporaryDirectory() as scratch:
        cases, out = pathlib.Path(scratch) / "cases.json", pathlib.Path(scratch) / "out.json"
        cases.write_text(json.dumps([{"folder": str(pathlib.Path(folder).resolve()), "inputs": list(inputs),
                                      "value_token": value} for folder, inputs, value in jobs]), "utf-8")
        runner = f"import runpy; runpy.run_path({hf_parity.__file__!r}, run_name='__main__')"
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        done = subprocess.run([sys.executable, "-I", "-c", runner, str(cases), str(out)], cwd=scratch, env=env,
                              capture_output=True, text=True)
        if done.returncode:
            raise ExportError(f"the checkpoint's check process failed:\n{done.stderr[-2000:]}")
        result = json.loads(out.read_text("utf-8"))
    return result["outputs"], result["project_modules"]

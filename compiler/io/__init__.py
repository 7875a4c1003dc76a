"""Model files, their serialisation and the TransformerLens export.

Modules in reading order:

* ``serialize`` — configs and programs as JSON-ready data.
* ``files`` — ``save_model`` / ``load_model``: safetensors with the description in the header.
* ``export_info`` — ``ExportInfo``: what an export's tensors mean (ids, decoding, padded heads,
  the projection of a compressed export).
* ``hf_tokenizer`` — a Hugging Face tokenizer over a compiled model's vocabulary.
* ``export`` — ``to_transformer_lens`` and ``export_weights``.
* ``huggingface`` — ``to_huggingface``: a model compiled with a LayerNorm as a GPT-2 checkpoint.
* ``hf_parity`` — a script that runs checkpoints in a process importing none of this project.

``save_model``, ``load_model`` and ``to_transformer_lens`` are re-exported by ``compiler``.
"""

__all__: list[str] = []

"""Model files, their serialisation and the TransformerLens export.

Modules in reading order:

* ``atomic`` — atomic file writes (temporary file, fsync, rename).
* ``serialize`` — configs and programs as JSON-ready data.
* ``files`` — ``save_model`` / ``load_model``: safetensors with the description in the header.
* ``export`` — ``to_transformer_lens`` and ``export_weights``.

``save_model``, ``load_model`` and ``to_transformer_lens`` are re-exported by ``compiler``.
"""

__all__: list[str] = []

"""Model files, their serialisation and the TransformerLens export."""

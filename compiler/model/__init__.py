"""The compiled model: configuration records, the Haiku transformer, encoders, weight access."""

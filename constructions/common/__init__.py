"""Pieces the construction families share with each other and with the compiler."""

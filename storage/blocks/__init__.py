"""Sealed blocks: their format, sealing head rows into them, reading them."""

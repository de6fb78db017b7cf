"""Upkeep: sealing, retention, deletes, flush and shutdown."""

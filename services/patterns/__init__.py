"""Patterns: templates mined from pushed lines, and the patterns API."""

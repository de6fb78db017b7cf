"""Loki's HTTP API and its operational endpoints, one module per group."""

"""Grafana's HTTP API under /api: dashboards, folders, search, identity."""

"""Grafana's API: dashboards, folders, search, permissions, identity, auth."""

"""Grafana's tables: folders, dashboards, stars, permissions, identity."""

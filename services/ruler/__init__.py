"""Ruler: rule groups, their evaluation, alerts and remote write."""

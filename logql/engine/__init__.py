"""Evaluation of log and metric queries through the storage boundary."""

"""Ingest: a push from its body to the commit, decoded, validated, limited."""

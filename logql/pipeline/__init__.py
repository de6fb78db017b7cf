"""Log pipeline stages: line filters, parsers, label filters, formats."""

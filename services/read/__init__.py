"""Read: queries, labels, series, volume, Drilldown, the tail; the query gate."""

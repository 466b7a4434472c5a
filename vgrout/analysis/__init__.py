"""Stage 7, analysis: the A1-A7 tables and figures from the committed per-sample grades and step logs (DuckDB), the diagnostics and the statistics' verdicts."""

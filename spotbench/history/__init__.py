"""Results across runs: the DuckDB catalogue, series per matrix point, change points."""

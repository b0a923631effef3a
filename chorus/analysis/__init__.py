"""Per-task analysis of many runs: complementarity, oracle unions, gap recovery, the CHORUS table.

Every function takes the tidy table of `chorus.tracking.runs.load_runs` (or matrices built from it)
and returns plain pandas / numpy data."""

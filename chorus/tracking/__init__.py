"""Per-task results in run directories: the source of truth for analysis."""

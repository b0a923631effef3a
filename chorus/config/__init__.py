"""chorus's configuration: the typed schema Hydra validates against (schema), which settings each job
reads (job_settings), what a job shares with the library (job_context), a run's identity and the dir it
names (run_identity) and the --help text (cli_help). The enums the schema is typed with live below it,
in chorus/core/modes.py (the simulator reads them)."""

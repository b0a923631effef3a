"""chorus's configuration: the typed schema Hydra validates against (schema), which settings each job
reads (job_settings), what a job shares with the library (job_context) and the --help text (cli_help).
The enums the schema is typed with live below it, in chorus/core/modes.py (the simulator reads them)."""

"""chorus's configuration: the typed schema Hydra validates against (schema), which settings each job
reads (job_settings), what a job shares with the library (job_context), the enums (modes) and the
--help text (cli_help)."""

"""The statistics' defaults that the configuration (config/schema.py) and chorus.analysis share.

N_BOOT: the bootstrap's resamples over tasks wherever a caller does not say. Every chorus.analysis
function defaults to it, and so does the `bootstrap` setting of chorus.analyze and of the pipeline's
report; the kept study verdicts (analysis/studies/v2/*/verdict) were computed with it, through the CLI,
and the study notebook's analyse() gives them again only because its default is the same count.
"""
N_BOOT = 1000

"""The ground layer: what every other chorus package may import. The Task and its file format (task)
and the closed sets of strings the configuration is typed with (modes), and the statistics' defaults a
setting and chorus.analysis share (stats: the bootstrap's resamples). Standard library only, so that
the simulator, the task loaders and the schema can all stand on it (docs/reference/layout.md)."""

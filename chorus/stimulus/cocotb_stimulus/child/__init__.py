"""The untrusted cocotb stimulus, run in a locked-down process of its own.

The chorus harness (harness_module.py, inside the simulator) starts main.py as
`python -I -S -B <this directory>/main.py` (run.py copies every module here into each run
directory) and talks to it over stdin/stdout, one JSON object per line (link.py). The stimulus
never runs in the simulator: an escape from the ast check (check.py) or from the restricted
builtins lands here, where the process can write no file, open no socket, start no process and
signal nobody (lockdown.py), so it cannot touch the coverage counters or any file of the run.
The stimulus sees stand-ins for the part of cocotb it may use (api.py): values.py, simtime.py,
triggers.py, sync.py, tasks.py and dut.py, run by scheduler.py.

These modules import only the standard library and each other, by bare name: main.py puts this
directory on sys.path. Only api.py and lockdown.py import no sibling; chorus imports api.API
(check.py) and nothing else from here.
"""

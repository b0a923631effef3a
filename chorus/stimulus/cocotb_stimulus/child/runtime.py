"""The one scheduler of this process (scheduler._Sched), set by main() once the harness has sent the
config. The stand-ins reach it as runtime.S when they run, so none of them imports the scheduler."""

S = None  # set by main()

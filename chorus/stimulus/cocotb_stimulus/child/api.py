"""What the stimulus may import: the API table and the stand-in modules built from it.

Imports no sibling module, so chorus can import it too (check.py answers other names before any
run); main.py passes the objects.
"""
import types

# What stimulus may import from each module (check.py answers other names before any run).
API = {
    "cocotb": ("start_soon", "start", "create_task", "end_test", "pass_test", "test", "log", "top"),
    "cocotb.triggers": ("Timer", "RisingEdge", "FallingEdge", "Edge", "ValueChange", "ClockCycles", "ReadOnly",
                        "ReadWrite", "NextTimeStep", "First", "Combine", "Event", "NullTrigger", "Trigger",
                        "SimTimeoutError", "with_timeout"),
    "cocotb.task": ("Task", "CancelledError", "current_task"),
    "cocotb.types": ("Logic", "LogicArray", "Range"),
    "cocotb.handle": ("Deposit", "Immediate"),
    "cocotb.queue": ("Queue", "QueueFull", "QueueEmpty"),
    "cocotb.utils": ("get_sim_time", "get_sim_steps", "get_time_from_sim_steps"),
    "cocotb.simtime": ("get_sim_time",),
    "cocotb.result": ("SimTimeoutError",),
    "cocotb.clock": (),
}


def stand_ins(objects: dict) -> dict:
    """A stand-in module per entry of API holding the names it lists, each taken from `objects`;
    cocotb also holds the others (cocotb.triggers, ...)."""
    mods = {}
    for name, names in API.items():
        mod = types.ModuleType(name)
        for n in names:
            setattr(mod, n, objects[n])
        mods[name] = mod
    for name, mod in mods.items():
        if name != "cocotb":
            setattr(mods["cocotb"], name.split(".")[1], mod)
    return mods

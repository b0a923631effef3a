"""Simulated time for the stimulus (cocotb.utils, cocotb.simtime), in the simulator's steps."""
import math

import runtime

_SCALE = {"fs": -15, "ps": -12, "ns": -9, "us": -6, "ms": -3, "sec": 0}


def _scale(unit):
    if unit not in _SCALE:
        raise ValueError(f"Invalid unit ({unit}) provided")
    return _SCALE[unit]


def _ldexp10(x, exp):  # cocotb's arithmetic, so rounding errors match
    return x * 10 ** exp if exp > 0 else x / 10 ** -exp


def get_sim_steps(time, unit="step", *, round_mode="error", units=None):
    unit = units or unit
    result = time if unit == "step" else _ldexp10(time, _scale(unit) - runtime.S.precision)
    if round_mode == "error":
        steps = math.floor(result)
        if steps != result:
            raise ValueError(f"Unable to accurately represent {time}({unit}) with the simulator precision of "
                             f"1e{runtime.S.precision}")
    elif round_mode in ("ceil", "floor", "round"):
        steps = {"ceil": math.ceil, "floor": math.floor, "round": round}[round_mode](result)
    else:
        raise ValueError(f"Invalid round_mode specifier: {round_mode}")
    return int(steps)


def get_time_from_sim_steps(steps, unit="step", *, units=None):
    unit = units or unit
    return steps if unit == "step" else _ldexp10(steps, runtime.S.precision - _scale(unit))


def get_sim_time(unit="step", *, units=None):
    return get_time_from_sim_steps(runtime.S.now, units or unit)

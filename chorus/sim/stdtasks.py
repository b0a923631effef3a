"""The IEEE 1800 system tasks and functions a testbench may call, and which of them only read.

An allowlist, so a task this list does not know (Verilator's $c family, $system, coverage
database loaders, PLI extensions) is rejected whatever it is called or however it was built.
"""
from __future__ import annotations


def _variants(*names: str) -> set[str]:
    return {f"{n}{s}" for n in names for s in ("", "b", "h", "o")}


_DISPLAY = _variants("$display", "$write", "$strobe", "$monitor", "$fdisplay", "$fwrite", "$fstrobe", "$fmonitor")
_MATH = {"$clog2", "$ln", "$log10", "$exp", "$sqrt", "$pow", "$floor", "$ceil", "$sin", "$cos", "$tan", "$asin",
         "$acos", "$atan", "$atan2", "$hypot", "$sinh", "$cosh", "$tanh", "$asinh", "$acosh", "$atanh"}
_QUERIES = {"$bits", "$isunbounded", "$typename", "$dimensions", "$unpacked_dimensions", "$left", "$right", "$low",
            "$high", "$increment", "$size", "$countbits", "$countones", "$onehot", "$onehot0", "$isunknown"}
_CONVERT = {"$rtoi", "$itor", "$realtobits", "$bitstoreal", "$shortrealtobits", "$bitstoshortreal", "$signed",
            "$unsigned"}
_SAMPLED = {"$sampled", "$rose", "$fell", "$stable", "$changed", "$past", *(f"${n}_gclk" for n in (
    "past", "rose", "fell", "stable", "changed", "future", "rising", "falling", "steady", "changing"))}
_CONTROL = {"$finish", "$stop", "$exit", "$fatal", "$error", "$warning", "$info", "$time", "$stime", "$realtime",
            "$timeformat", "$printtimescale", "$timeunit", "$timeprecision", "$monitoron", "$monitoroff",
            "$asserton", "$assertoff", "$assertkill", "$assertcontrol", "$assertpasson", "$assertpassoff",
            "$assertfailon", "$assertfailoff", "$assertnonvacuouson", "$assertvacuousoff", "$test$plusargs",
            "$dumpvars", "$dumpoff", "$dumpon", "$dumpall", "$dumplimit", "$dumpflush", "$fclose", "$fflush",
            "$feof", "$sformatf", "$psprintf", "$writememb", "$writememh", "$dumpfile", "$fopen"}
# Only read their arguments (the file tasks among them write files, confined to the run dir).
READ_ONLY_TASKS = frozenset(_DISPLAY | _MATH | _QUERIES | _CONVERT | _SAMPLED | _CONTROL)
# May write an argument: scanned values, seeds, loaded memories, casts, formatted strings.
_WRITING = {"$random", "$urandom", "$urandom_range", "$dist_uniform", "$dist_normal", "$dist_exponential",
            "$dist_poisson", "$dist_chi_square", "$dist_t", "$dist_erlang", "$cast", "$value$plusargs",
            "$fgetc", "$ungetc", "$fgets", "$fscanf", "$sscanf", "$fread", "$ftell", "$fseek", "$rewind",
            "$ferror", "$readmemb", "$readmemh", *_variants("$swrite"), "$sformat"}
STANDARD_TASKS = frozenset(READ_ONLY_TASKS | _WRITING)
# The first argument names a file.
FILE_TASKS = frozenset({"$fopen", "$readmemh", "$readmemb", "$writememh", "$writememb", "$dumpfile"})

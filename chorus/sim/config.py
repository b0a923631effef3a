"""Simulator settings: one frozen dataclass, the `simulator` group's schema and its defaults
(conf/simulator/verilator.yaml states only what differs)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

from ..core.modes import Isolation, SimExecutor


@dataclass(frozen=True)
class SimConfig:
    max_sim_time_ns: float = 2_000_000.0  # testbenches that never $finish stop here, with coverage
    build_timeout_s: float = 180.0
    run_timeout_s: float = 30.0  # wall clock, whole process group killed
    mem_limit_mb: int = 4096  # address-space limit for compiler and simulation
    output_limit_mb: int = 64  # any one file the simulation writes, stdout included
    error_limit: int = 1000  # +verilator+error+limit: $error must not end the run
    strict_instance: bool = False  # CVDP rule: pass only if the required instance name exists
    # OS isolation of builds and runs; a plain string is accepted too (isolation.check validates it)
    isolation: Isolation = Isolation.required
    # Everything one run may write (every format): its files, held by a tmpfs of this size as its
    # whole disk, and its output. A run over it is a runtime_error, its files gone, no coverage counted.
    run_write_mb: int = 256
    disk_quota_mb: int = 256  # everything one build writes, in total (summed while it runs)
    max_testbench_kb: int = 1024  # larger testbenches are rejected before any work
    allow_dut_writes: bool = False  # permit force/release/hierarchical writes into the DUT
    opt: str = "-O0"  # C++ optimisation of a testbench's model: built for one run, so compile time counts most
    # ... and of the vectors format's harness, built once per design and run for every sample: -O1 runs
    # its batches ~1.4x as fast as -O0 for under 0.1 s more per build (bench/sim_throughput.py). A
    # design's zero-delay loop must still hang, though C++ lets an optimiser assume loops end.
    harness_opt: str = "-O1 -fno-finite-loops"
    jobs: int = 2  # make -j for one build
    prebuilt_runtime: bool = True
    pch: bool = True
    clang: bool = True  # compile models with clang (ziglang wheel) when present: same program, ~4x faster compile
    ccache: bool = True
    cache: bool = True
    cache_dir: str | None = None  # default: $CHORUS_CACHE_DIR or ~/.cache/chorus
    # Result entries only (build caches are separate); null: no cap. ~9 KB a result, so 10 GB holds
    # about a million: hundreds of RL steps of thousands of testbenches, small beside a checkpoint.
    cache_max_gb: float | None = 10.0
    executor: SimExecutor = SimExecutor.local  # where simulations run; a plain string is accepted too
    # executor=ray: the cluster's address ("auto" or host:port, as for `ray.init`); null: start a local one
    executor_address: str | None = None
    # executor=ray: what each simulation reserves when Ray schedules it; memory null: no reservation
    # (mem_limit_mb caps the address space, which is far above what a simulation keeps resident)
    executor_cpus: float = 1.0
    executor_memory_mb: int | None = None
    # What scoring one sample may cost the unjailed worker that parses and checks it (its jailed
    # builds and runs have the limits above): address space grown, CPU seconds. Over it, the
    # sample is charged (compile_error or runtime_error); the worker's other samples are re-run.
    scoring_mem_mb: int = 2048
    scoring_cpu_s: float = 120.0
    # What checking one testbench may cost (checker.py: its pyslang reading and the walk of
    # Verilator's tree of it, each in a child process): wall clock and CPU seconds, and address
    # space grown past start-up. Over it the sample is charged (rejected, naming the setting); the
    # jailed `--json-only` run that makes the tree gets the same time. A honest testbench needs
    # well under a second and tens of MB; 1 KB of nested generate loops or macros can ask minutes.
    check_timeout_s: float = 30.0
    check_mem_mb: int = 512
    keep_workdir: bool = False
    naive_build: bool = False  # plain --coverage at Verilator's default -Os, nothing reused (benchmark baseline)
    extra_verilator_flags: tuple[str, ...] = field(default_factory=tuple)

    def fingerprint(self) -> str:
        """Settings that can change a result (not speed-only knobs)."""
        d = asdict(self)
        for k in ("build_timeout_s", "run_timeout_s", "jobs", "prebuilt_runtime", "pch", "clang", "ccache",
                  "cache", "cache_dir", "cache_max_gb", "keep_workdir", "isolation",
                  "executor", "executor_address", "executor_cpus", "executor_memory_mb", "scoring_mem_mb",
                  "scoring_cpu_s", "check_timeout_s", "check_mem_mb"):
            d.pop(k)
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=list).encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, d: dict | None) -> "SimConfig":
        d = dict(d or {})
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown simulator option(s) {unknown}; valid: {sorted(known)}")
        if "extra_verilator_flags" in d:
            d["extra_verilator_flags"] = tuple(d["extra_verilator_flags"] or ())
        if "executor" in d:
            try:
                d["executor"] = SimExecutor(str(d["executor"]))
            except ValueError:
                raise ValueError(f"unknown simulator.executor {d['executor']!r}; valid: "
                                 f"{[e.value for e in SimExecutor]}") from None
        return cls(**d)


def sim_config(settings: dict) -> tuple[SimConfig, int | None]:
    """The `simulator` config group as (SimConfig, number of parallel workers); raises a one-line
    error before any work when the isolation it asks for cannot be had here."""
    from .cache import default_cache_root
    from .isolation import check

    settings = dict(settings)
    workers = settings.pop("workers", None)
    cfg = SimConfig.from_dict(settings)
    check(cfg.isolation, str(default_cache_root(cfg.cache_dir)))
    return cfg, workers

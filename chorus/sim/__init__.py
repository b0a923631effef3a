"""Simulator backend: sandboxed, cached Verilator builds scored like CVDP's IMC report."""
from .config import SimConfig
from .coverage import CoverageReport
from .result import STATUSES, SimResult
from .simulate import simulate

__all__ = ["SimConfig", "CoverageReport", "SimResult", "STATUSES", "simulate"]

"""Evaluation protocols: how a policy is asked (direct sampling, agentic refinement)."""
from .direct import run_direct

PROTOCOLS = {"direct": run_direct}

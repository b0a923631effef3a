"""Evaluation protocols: how a policy is asked (direct sampling, agentic refinement)."""
from .agentic import run_agentic
from .direct import run_direct

PROTOCOLS = {"direct": run_direct, "agentic": run_agentic}

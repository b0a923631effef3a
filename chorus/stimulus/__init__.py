"""Stimulus formats: how a policy's completion becomes something the simulator can score."""

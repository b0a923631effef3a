"""Staged SFT: data built from executed stimulus, and (later) the trainer."""

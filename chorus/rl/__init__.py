"""Execution-guided RL: rewards, advantages and policy losses as pure functions (trainers call them)."""

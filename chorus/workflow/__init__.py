"""Chaining chorus jobs: a small DAG of command lines, each with its own run dir, skipped when done."""

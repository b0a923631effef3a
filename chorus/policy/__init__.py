"""Policies: where testbenches come from."""

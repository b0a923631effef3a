"""Adaptive multi-teacher on-policy distillation: reward-gated routing, losses, trainer."""

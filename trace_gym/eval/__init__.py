"""Evaluation: pass^k with bootstrap intervals, per-group tables, policy comparisons."""

from .metrics import PassK, bootstrap_pass_hat_k, pass_hat_k, task_pass_hat_k

__all__ = ["PassK", "bootstrap_pass_hat_k", "pass_hat_k", "task_pass_hat_k"]

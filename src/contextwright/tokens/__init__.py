"""Token counting (counter.py) and the LLM model registry that budgets read windows from
(models.py)."""

"""The assemble pipeline, one step per module: request (validated once), sources and their
context, candidates, scoring, selection (rules, chains, locality), packing under the budget,
render, references, the per-process source cache, and the `Assembly` result (result.py).

Steps other than the sources are pure functions; `run.py` strings them together for one call.
"""

"""The trace of an assemble call and what works on stored traces: building and reading it
(trace.py), writing it off the hot path (writer.py), replay and diff (replay.py, diff.py)."""

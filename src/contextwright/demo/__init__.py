"""`make demo`: a product team's week replayed into a fresh SQLite file, then three agents' windows.

The demo is a list of *acts* (see `ACTS` in `__main__.py`). An act is a function
`act(engine, console) -> None`: it may write records, assemble windows and print through the
`Console` of `show.py` (rich when installed, plain text otherwise). Acts run in order against one
engine whose clock is frozen at the end of the simulated week, so the output is the same on every
run. To add a part to the demo, write an act and append it to `ACTS`.

    python -m contextwright.demo [--out demo-out] [--plain] [--full]
"""

from __future__ import annotations

from .scenario import NOW, PROJECT, TEAM, Replay, clock, replay

__all__ = ["NOW", "PROJECT", "TEAM", "Replay", "clock", "replay"]

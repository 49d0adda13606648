"""Which source's cap a candidate counts against.

A source cap (`Engine(source_caps=...)`) keeps one verbose source from crowding the others out of
the window. A record that two sources found independently (full text and vectors agree on it) is
not one source's verbosity: it is charged to a source without a cap when one of its sources has
none, and then to no cap at all. On LoCoMo (dev), with the default caps, charging full text only
for what it alone found took turn recall at 1,000 tokens from 0.839 to 0.865 (docs/recall.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from .candidates import Candidate


def charged_source(c: Candidate, caps: Mapping[str, int]) -> str | None:
    """The source whose cap `c` uses: its own, unless another source that found it is uncapped
    (None: no cap applies)."""
    if c.source not in caps:
        return None
    if len(c.sources) > 1 and any(s not in caps for s in c.sources):
        return None
    return c.source

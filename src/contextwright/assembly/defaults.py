"""The default sources of an engine, in one list (the Engine adds its features' sources to it)."""

from __future__ import annotations

from .kv_source import KVSource
from .sources import (
    AddressedSource,
    DecisionsSource,
    FullTextSource,
    HistorySource,
    OpenItemsSource,
    PinnedSource,
    Source,
)


def default_sources() -> list[Source]:

    return [
        HistorySource(),
        AddressedSource(),
        OpenItemsSource(),
        FullTextSource(),
        PinnedSource(),
        DecisionsSource(),
        KVSource(),
    ]

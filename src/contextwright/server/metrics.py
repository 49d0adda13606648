"""Prometheus metrics for one app, in its own registry (so tests may create many apps).

contextwright_assemble_seconds   histogram of assemble latency, by format
contextwright_assemble_queue_seconds  of which waiting for one of the process's assemble slots
contextwright_records_added_total  records stored through the API
contextwright_records            records in the store, read at scrape time
contextwright_errors_total       problem responses, by type and status
contextwright_requests_total     requests, by method, route and status
contextwright_traces_unstored    assemble calls whose trace the store would not take (their
                                 trace ids then answer 404), since the engine began
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    def __init__(
        self, count_records: Callable[[], int], unstored: Callable[[], int] = lambda: 0
    ) -> None:
        self.registry = CollectorRegistry()
        self.assemble_seconds = Histogram(
            "contextwright_assemble_seconds",
            "Latency of assemble calls",
            ["format"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.assemble_queue_seconds = Histogram(
            "contextwright_assemble_queue_seconds",
            "Time assemble calls waited for one of the process's assemble slots (gate.py)",
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.records_added = Counter(
            "contextwright_records_added", "Records stored through the API", registry=self.registry
        )
        self.records = Gauge(
            "contextwright_records", "Records in the store", registry=self.registry
        )
        self.records.set_function(lambda: float(count_records()))
        # The trace writer's fallback (traces/writer.py): the call was answered, its trace lost.
        self.traces_unstored = Gauge(
            "contextwright_traces_unstored",
            "Traces of assemble calls the store would not take (their ids answer 404)",
            registry=self.registry,
        )
        self.traces_unstored.set_function(lambda: float(unstored()))
        self.errors = Counter(
            "contextwright_errors",
            "Problem responses by type and status",
            ["type", "status"],
            registry=self.registry,
        )
        self.requests = Counter(
            "contextwright_requests",
            "Requests by method, route and status",
            ["method", "route", "status"],
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)


class RequestCounter:
    """Pure ASGI middleware counting requests by method, route template and status."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.requests.labels(
                method=scope["method"], route=route, status=str(status)
            ).inc()

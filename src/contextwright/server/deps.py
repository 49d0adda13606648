"""Per-request context for routes: the engine, who is calling, and the project they may use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Path, Request
from fastapi.responses import JSONResponse

from ..engine import Engine

try:  # the `server` extra's encoder: a 140 KB window with its items in a fifth of the time
    import orjson as _orjson
except ImportError:  # pragma: no cover - the extra installs it
    _orjson = None  # type: ignore[assignment]
from .access import Access, get_access
from .metrics import Metrics

PROJECT_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:\-]*$"
PROJECT_MAX = 200
ProjectName = Annotated[str, Path(min_length=1, max_length=PROJECT_MAX, pattern=PROJECT_PATTERN)]


@dataclass(frozen=True)
class Ctx:
    engine: Engine
    access: Access
    metrics: Metrics


@dataclass(frozen=True)
class ProjectCtx(Ctx):
    project: str


# The dependencies are async though they never wait: FastAPI runs a plain function dependency in
# its thread pool, one hop per dependency per request, each a thread wake-up and a turn at the GIL
# behind the request threads already running. Three such hops cost an add more than the add
# (docs/benchmarks.md, "The HTTP service"); on the event loop they cost microseconds.
async def get_ctx(request: Request, access: Annotated[Access, Depends(get_access)]) -> Ctx:
    return Ctx(request.app.state.engine, access, request.app.state.metrics)


# The key first, as get_ctx (a missing key is a 401 whatever the path), without get_ctx itself:
# FastAPI's solving of each dependency level cost an add ~10% of its HTTP overhead.
async def get_project_ctx(
    request: Request, project: ProjectName, access: Annotated[Access, Depends(get_access)]
) -> ProjectCtx:
    return project_ctx(request.app.state, access, project)


def project_ctx(state: Any, access: Access, project: str) -> ProjectCtx:
    """The context of a request on `project`, once `access` may use it (else a 403)."""
    access.require(project)
    return ProjectCtx(state.engine, access, state.metrics, project)


class FastJSON(JSONResponse):
    """JSON encoded by orjson where it is installed (the `server` extra), else by the standard
    library, as Starlette's JSONResponse writes it (compact, UTF-8). The same values either way
    (orjson may spell a float differently: `1e-5` for `1e-05`); what orjson cannot encode
    (integers past 64 bits, keys that are not strings, lone surrogates) goes to the standard
    encoder, which answers or raises as before. A NaN, which no answer holds (records refuse
    one in meta), would be `null` where the standard encoder raises."""

    def render(self, content: Any) -> bytes:
        if _orjson is not None:
            try:
                return bytes(_orjson.dumps(content))
            except (TypeError, ValueError):
                pass
        return super().render(content)


def fast_json(data: Any, status_code: int = 200) -> JSONResponse:
    """Answer plain JSON data directly: FastAPI's generic encoder walks every nested value and
    costs more than the assemble itself on a large trace, and a route that returns data has it
    validated against the return type in one more thread-pool hop; our payloads are JSON
    already."""
    return FastJSON(data, status_code=status_code)


CtxDep = Annotated[Ctx, Depends(get_ctx)]
ProjectDep = Annotated[ProjectCtx, Depends(get_project_ctx)]

"""Context rules: list the engine's rules, validate a rules document, reload the rules directory."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from ...rules.ruleset import parse_document
from ..deps import CtxDep
from ..problems import HTTPProblem

router = APIRouter(tags=["rules"])


class RulesDoc(BaseModel):
    """A rules file's content: {"rules": [...]}."""

    model_config = ConfigDict(extra="allow")

    rules: list[Any]


@router.get("/v1/rules")
def list_rules(ctx: CtxDep) -> dict[str, Any]:
    ruleset = ctx.engine.rules
    return {
        "directory": str(ruleset.directory) if ruleset.directory is not None else None,
        "rules": [r.to_dict() for r in ruleset.rules],
    }


@router.post("/v1/rules/validate")
def validate_rules(ctx: CtxDep, body: RulesDoc) -> dict[str, Any]:
    """Check a rules document without loading it: every problem with its field and fix."""
    rules, errors = parse_document(body.model_dump(), "<request>")
    return {
        "valid": not errors,
        "rules": [r.to_dict() for r in rules] if not errors else [],
        "problems": [{"field": e.field, "fix": e.fix, "detail": e.message} for e in errors],
    }


@router.post("/v1/rules/reload")
def reload_rules(ctx: CtxDep) -> dict[str, Any]:
    """Read the rules directory again; an invalid directory keeps the old rules (422)."""
    if not ctx.access.admin:
        raise HTTPProblem(
            403, "Forbidden", "only an admin key may reload the rules", "authorization"
        )
    ruleset = ctx.engine.reload_rules()
    return {"loaded": len(ruleset), "rules": [r.to_dict() for r in ruleset.rules]}

"""One exception tree for the whole library; the edges (CLI, HTTP, MCP) translate it, nothing else.

ContextwrightError
├── ValidationError      bad input: names the field, the value and the fix
├── NotFound             an id, agent, project or reference that does not exist
├── BudgetError          a budget that cannot hold even the state section
├── ContextOverflow      the window still overflows after every recovery step
├── RuleError            a context rule that does not parse or validate
├── StoreError           the store could not be opened or written
└── MissingExtra         an optional part was used without its extra installed
"""

from __future__ import annotations

from typing import Any


class ContextwrightError(Exception):
    """Base of every error contextwright raises on purpose."""

    error_type = "contextwright_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.error_type, "message": self.message, **self.details}


class ValidationError(ContextwrightError):
    """Input that does not fit: the message names the field, the value and the fix."""

    error_type = "validation_error"

    def __init__(self, field: str, value: Any, fix: str, *, problem: str | None = None) -> None:
        shown = _short(value)
        what = problem or "is not valid"
        super().__init__(f"{field}={shown} {what}: {fix}", field=field, fix=fix)
        self.field = field
        self.value = value
        self.fix = fix
        self.problem = what


class NotFound(ContextwrightError):
    error_type = "not_found"

    def __init__(self, what: str, ident: str, fix: str = "") -> None:
        msg = f"{what} {ident!r} does not exist" + (f": {fix}" if fix else "")
        super().__init__(msg, what=what, id=ident)
        self.what = what
        self.ident = ident


class BudgetError(ContextwrightError):
    error_type = "budget_error"


class ContextOverflow(ContextwrightError):
    """The window would overflow even after every recovery step; carries the breakdown."""

    error_type = "context_overflow"

    def __init__(self, message: str, breakdown: dict[str, Any]) -> None:
        super().__init__(message, breakdown=breakdown)
        self.breakdown = breakdown


class RuleError(ContextwrightError):
    error_type = "rule_error"

    def __init__(self, file: str, field: str, fix: str) -> None:
        super().__init__(f"{file}: {field}: {fix}", file=file, field=field, fix=fix)
        self.file = file
        self.field = field
        self.fix = fix


class StoreError(ContextwrightError):
    error_type = "store_error"


class MissingExtra(ContextwrightError):
    error_type = "missing_extra"

    def __init__(self, what: str, extra: str, *, found: str | None = None) -> None:
        # `found`: the package is installed, at a version the code cannot use (e.g. "mcp 1.30.0");
        # saying "install the extra" would then send the user to a no-op.
        if found is None:
            message = f"{what} requires the '{extra}' extra: pip install 'contextwright[{extra}]'"
        else:
            message = (
                f"{what} requires the '{extra}' extra at the versions it pins, and {found} is "
                f"installed: pip install --upgrade 'contextwright[{extra}]'"
            )
        super().__init__(message, extra=extra, **({"found": found} if found else {}))


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 15] + f"...({len(text)} chars)"

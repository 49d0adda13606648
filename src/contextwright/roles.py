"""Agents and role profiles: which kinds and sources matter to a role, its default budget and
complexity. A reviewer and a developer see different things because their profiles weigh differently."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .budget import Budget
from .errors import ValidationError
from .records import KINDS


@dataclass(frozen=True, slots=True)
class RoleProfile:
    name: str
    # Weight per record kind, 0..1; kinds not named get `default_kind_weight`.
    kind_weights: Mapping[str, float] = field(default_factory=dict)
    # Multiplier per source; 0 turns a source off for the role.
    source_weights: Mapping[str, float] = field(default_factory=dict)
    default_kind_weight: float = 0.5
    default_model: str = "gpt-4o"
    default_window: int = 8_000
    complexity: str = "normal"

    def kind_weight(self, kind: str) -> float:
        return float(self.kind_weights.get(kind, self.default_kind_weight))

    def source_weight(self, source: str) -> float:
        return float(self.source_weights.get(source, 1.0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind_weights": dict(self.kind_weights),
            "source_weights": dict(self.source_weights),
            "default_kind_weight": self.default_kind_weight,
            "default_model": self.default_model,
            "default_window": self.default_window,
            "complexity": self.complexity,
        }

    def budget(self) -> Budget:
        """The budget of a call that gives none. Where this process cannot make it (a model it
        does not know, a window past the model's), the profile's field is named."""
        try:
            return Budget(model=self.default_model, window=self.default_window)
        except ValidationError as exc:
            model = exc.field == "model"
            field = "profile.default_model" if model else "profile.default_window"
            value = self.default_model if model else self.default_window
            raise ValidationError(field, value, exc.fix) from None

    def check_model(self) -> RoleProfile:
        """A profile being registered names a model this process knows, and a window it has."""
        self.budget()
        return self

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoleProfile:
        if not isinstance(data, Mapping):
            raise ValidationError("profile", data, "give an object with name, kind_weights, ...")
        known = {
            "name",
            "kind_weights",
            "source_weights",
            "default_kind_weight",
            "default_model",
            "default_window",
            "complexity",
        }
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValidationError(
                f"profile.{unknown[0]}", data[unknown[0]], f"use {', '.join(sorted(known))}"
            )
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise ValidationError("profile.name", name, "name the role, e.g. 'reviewer'")
        for key in ("kind_weights", "source_weights"):
            weights = data.get(key, {})
            if not isinstance(weights, Mapping) or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 10
                for v in weights.values()
            ):
                raise ValidationError(
                    f"profile.{key}", weights, "give {name: weight} with weights from 0 to 10"
                )
        complexity = data.get("complexity", "normal")
        if complexity not in ("easy", "normal", "complex"):
            raise ValidationError("profile.complexity", complexity, "use easy, normal or complex")
        # Checked here, not when a window is first built on them: a NaN weight scored every item
        # NaN, and a window of NaN, infinity or 1e400 failed int() (a 500 over HTTP).
        weight = data.get("default_kind_weight", 0.5)
        if not isinstance(weight, int | float) or isinstance(weight, bool) or not 0 <= weight <= 10:
            raise ValidationError(
                "profile.default_kind_weight", weight, "give a weight from 0 to 10"
            )
        # Only the types here: this also reads stored profiles, whose model may be registered
        # in another process (register_model is per process); check_model runs on writes.
        model = data.get("default_model", "gpt-4o")
        if not isinstance(model, str) or not model:
            raise ValidationError("profile.default_model", model, "name a model, e.g. 'gpt-4o'")
        window = data.get("default_window", 8_000)
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise ValidationError("profile.default_window", window, "give whole tokens, 1 or more")
        return cls(
            name=name,
            kind_weights=dict(data.get("kind_weights", {})),
            source_weights=dict(data.get("source_weights", {})),
            default_kind_weight=float(weight),
            default_model=model,
            default_window=window,
            complexity=complexity,
        )


def _profile(
    name: str, weights: dict[str, float], sources: dict[str, float] | None = None
) -> RoleProfile:
    return RoleProfile(name=name, kind_weights=weights, source_weights=sources or {})


ROLE_PROFILES: dict[str, RoleProfile] = {
    p.name: p
    for p in (
        _profile("default", {}),
        _profile(
            "developer",
            {
                "task": 1.0,
                "decision": 0.9,
                "pattern": 1.0,
                "gotcha": 1.0,
                "artifact": 0.7,  # a reviewer reads artifacts; a developer reads the code
                "file": 1.0,
                "tool_result": 0.7,
                "handoff": 0.9,
                "constraint": 1.0,
                "question": 0.7,
                "message": 0.5,
                "note": 0.4,
                "preference": 0.6,
            },
        ),
        _profile(
            "reviewer",
            {
                "decision": 1.0,
                "artifact": 1.0,
                "constraint": 1.0,
                "gotcha": 0.9,
                "pattern": 0.9,
                "handoff": 0.9,
                "question": 0.8,
                "task": 0.7,
                "tool_result": 0.4,
                "message": 0.5,
                "note": 0.5,
            },
        ),
        _profile(
            "researcher",
            {
                "question": 1.0,
                "note": 0.9,
                "memory": 0.9,
                "decision": 0.8,
                "artifact": 0.7,
                "message": 0.6,
                "task": 0.6,
                "tool_result": 0.6,
                "file": 0.5,
            },
        ),
        _profile(
            "pm",
            {
                "task": 1.0,
                "decision": 1.0,
                "question": 1.0,
                "handoff": 0.9,
                "message": 0.7,
                "preference": 0.8,
                "constraint": 0.8,
                "tool_call": 0.1,
                "tool_result": 0.1,
                "file": 0.2,
                "pattern": 0.3,
            },
        ),
    )
}


@dataclass(frozen=True, slots=True)
class Agent:
    id: str
    role: str = "default"
    profile: RoleProfile = field(default_factory=lambda: ROLE_PROFILES["default"])

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "role": self.role, "profile": self.profile.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Agent:
        return cls(id=data["id"], role=data["role"], profile=RoleProfile.from_dict(data["profile"]))


def check_kinds(profile: RoleProfile) -> None:
    """Each weighed kind is a record kind: a typo would weigh nothing, and the role would see
    that kind at the default weight. Checked when a profile is registered, not when a stored one
    is read back, so that an agent stored before keeps working."""
    for kind in profile.kind_weights:
        if kind not in KINDS:
            raise ValidationError(
                f"profile.kind_weights.{kind}",
                kind,
                f"weigh record kinds: {', '.join(KINDS)}",
                problem="is not a record kind",
            )


def profile_for(role: str) -> RoleProfile:
    return ROLE_PROFILES.get(role, RoleProfile(name=role))

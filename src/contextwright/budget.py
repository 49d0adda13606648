"""Budget: model window − reserved response = available, with the model's safety margin applied."""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ValidationError
from .tokens.models import MODELS, ModelSpec, model_spec

# The window's sections, highest priority first: what section caps name and the packer fills.
SECTIONS = (
    "state",
    "warnings",
    "constraints",
    "knowledge",
    "history",
    "suggestions",
    "working_memory",
)


@dataclass(frozen=True)
class Budget:
    """What one assemble may spend. `window` and `reserve` default to the model registry's values."""

    model: str = "gpt-4o"
    window: int | None = None
    reserve: int | None = None
    # Optional per-section ceilings in tokens, e.g. {"history": 2000}.
    section_caps: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        spec = model_spec(self.model)
        for name in ("window", "reserve"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 0
            ):
                raise ValidationError(f"budget.{name}", value, "give a whole number of tokens >= 0")
        window = self.window if self.window is not None else spec.window
        reserve = self.reserve if self.reserve is not None else min(spec.reserve, window // 4)
        if window <= 0:
            raise ValidationError("budget.window", window, "give a window of at least 1 token")
        if window > spec.window:
            raise ValidationError(
                "budget.window", window, f"{self.model} holds at most {spec.window} tokens"
            )
        if reserve >= window:
            raise ValidationError(
                "budget.reserve", reserve, f"reserve must be smaller than the window ({window})"
            )
        if not isinstance(self.section_caps, dict):
            raise ValidationError(
                "budget.section_caps", self.section_caps, "give {section: tokens}"
            )
        for name, cap in self.section_caps.items():
            if name not in SECTIONS:
                raise ValidationError(
                    "budget.section_caps", name, f"use section names: {', '.join(SECTIONS)}"
                )
            if not isinstance(cap, int) or cap < 0:
                raise ValidationError(f"budget.section_caps.{name}", cap, "give tokens >= 0")
        object.__setattr__(self, "window", window)
        object.__setattr__(self, "reserve", reserve)

    @property
    def spec(self) -> ModelSpec:
        return MODELS[self.model]

    @property
    def available(self) -> int:
        """Tokens the rendered window may use, as counted by cl100k, margin applied."""
        assert self.window is not None and self.reserve is not None
        return int((self.window - self.reserve) / (1.0 + self.spec.margin))

    @classmethod
    def coerce(cls, value: object) -> Budget:
        if isinstance(value, Budget):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(model="cl100k", window=value, reserve=0) if value > 0 else cls._bad(value)
        if isinstance(value, dict):
            unknown = set(value) - {"model", "window", "reserve", "section_caps"}
            if unknown:
                raise ValidationError(
                    f"budget.{sorted(unknown)[0]}",
                    value,
                    "use model, window, reserve, section_caps",
                )
            return cls(**value)
        return cls._bad(value)

    @staticmethod
    def _bad(value: object) -> Budget:
        raise ValidationError(
            "budget", value, "give Budget(model=..., window=..., reserve=...) or a window in tokens"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "window": self.window,
            "reserve": self.reserve,
            "available": self.available,
            "margin": self.spec.margin,
            "section_caps": dict(self.section_caps),
        }

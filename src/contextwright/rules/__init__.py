"""Context rules: JSON condition/action documents (ruleset.py: parsing, validation, matching)
and what a matched rule does to one assemble call (actions.py: include, suppress, pin, boost,
cap). The published JSON Schema is `schemas/rule.schema.json`."""

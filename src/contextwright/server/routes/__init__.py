"""HTTP routes, one module per concept; each route is a few lines that call the engine."""

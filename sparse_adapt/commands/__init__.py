"""CLI commands, one module per concept; each exposes ``register(app)``."""

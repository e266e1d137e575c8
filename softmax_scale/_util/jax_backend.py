"""JAX, imported in one place (the training harness, the real decoder's JAX pass): one clear error without it."""

from __future__ import annotations

try:
    import jax
    import jax.numpy as jnp
    import optax
except ImportError as err:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        f"JAX and optax are needed ({err.name} is missing): pip install 'softmax_scale[train]'"
    ) from err

__all__ = ["jax", "jnp", "optax"]

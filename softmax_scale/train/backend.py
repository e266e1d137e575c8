"""JAX, imported in one place: a missing install is one clear error naming the ``train`` extra."""

from __future__ import annotations

try:
    import jax
    import jax.numpy as jnp
    import optax
except ImportError as err:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        f"softmax_scale.train needs JAX and optax ({err.name} is missing): pip install 'softmax_scale[train]'"
    ) from err

__all__ = ["jax", "jnp", "optax"]

"""RoPE and its variants for positions beyond the training length.

One definition of the rotation frequencies, used by the numpy decoder
(:mod:`softmax_scale.models.llama`) and the JAX training harness (:mod:`softmax_scale.train`).
A RoPE variant changes ``q`` and ``k``; a scale (:mod:`softmax_scale.schemes`) multiplies
``q.k``: the two axes are kept apart.
"""

from __future__ import annotations

import math

import numpy as np

from .._util.validation import check_choice, check_int

__all__ = ["ROPES", "ROPE_CHANGES", "rerope_near", "rerope_window", "rope_frequencies"]

#: RoPE variants for positions beyond the training length (see :func:`rope_frequencies`;
#: ``rerope`` also changes the attention, see :func:`rerope_near`).
ROPES = ("none", "pi", "ntk", "dynamic_ntk", "yarn", "rerope")

#: What each of :data:`ROPES` changes past the training length, in one line: the rotation
#: frequencies only (``rerope`` the relative positions); none of them touches the scale on ``q.k``.
ROPE_CHANGES = {
    "none": "the trained frequencies at every length",
    "pi": "position interpolation: every frequency divided by s = n/L",
    "ntk": "NTK-aware: the base multiplied by s^(d/(d-2)), one s = n/L for the whole sequence",
    "dynamic_ntk": "the ntk base grown with the current length (Hugging Face's dynamic rope_scaling)",
    "yarn": "YaRN's frequencies only (NTK-by-parts); its temperature (0.1 ln s + 1)^2 is the `yarn` scale",
    "rerope": "the trained frequencies; keys farther than a window are seen at the window's distance",
}


def rope_frequencies(rope: str, head_dim: int, base: float, train_length: int, n: int) -> np.ndarray:
    """Inverse frequencies ``theta_i`` (``i < head_dim/2``) of a RoPE variant for a sequence of ``n``.

    The extension factor is ``s = max(1, n / train_length)``, fixed for the whole sequence (the
    static form, as one forward pass over ``n`` tokens sees it). At ``n <= train_length``
    every variant returns the trained frequencies ``base^(-2i/d)``.

    - ``"none"``: the trained frequencies at every length.
    - ``"pi"``: position interpolation, ``theta_i / s`` (Chen et al. 2023, arXiv 2306.15595).
    - ``"ntk"``: NTK-aware base scaling, ``base' = base s^(d/(d-2))`` (bloc97's 2023 post; the
      formula of Hugging Face's dynamic-NTK rotary embedding with factor 1 at ``n = s L``).
    - ``"dynamic_ntk"``: Hugging Face's ``rope_scaling={"type": "dynamic"}``
      (``_compute_dynamic_ntk_parameters``: ``base' = base (f n / L - (f - 1))^(d/(d-2))`` for
      ``n > L``, here with factor ``f = 1``) and Qwen-7B's ``use_dynamic_ntk``: the base grows
      with the *current* sequence length ``n``, and a sequence of at most ``L`` tokens is
      untouched.  For one forward pass over ``n`` tokens it is ``"ntk"`` at ``s = n / L``; it
      differs from ``"ntk"`` in what ``n`` the caller passes: the length of the sequence so far,
      not the final one (the causal evaluation of :mod:`softmax_scale.train` passes, for each
      bucket of positions, the bucket's end).
    - ``"rerope"``: the trained frequencies; Su's ReRoPE changes the *attention* instead: keys
      farther than the window ``w`` from the query are seen at relative position ``w``
      (:func:`rerope_near`, :func:`rerope_window`).
    - ``"yarn"``: NTK-by-parts (Peng et al. 2023, arXiv 2309.00071, ``alpha = 1``, ``beta = 32``):
      dimensions that turn more than 32 times over ``L`` keep ``theta_i``, fewer than once are
      interpolated (``theta_i / s``). Between them the ramp follows the authors' reference code
      (``_yarn_find_correction_range`` / ``linear_ramp_mask``, also Hugging Face's
      ``_compute_yarn_parameters``): linear in the dimension *index* between the indices where
      ``r = 32`` and ``r = 1``, rounded outward; the paper writes the ramp as
      linear in ``r`` itself. The two agree outside the ramp; for SmolLM2 (``d = 64``,
      base 100000, ``L = 8192``) the ramp runs over frequency indices 10 to 20 of 32.

    YaRN's attention temperature is a *scale*, the ``yarn`` scheme of :mod:`softmax_scale.schemes`,
    not part of this function.
    """
    check_choice(rope, "rope", ROPES)
    half = head_dim // 2
    i = np.arange(half, dtype=np.float64)
    theta = base ** (-2.0 * i / head_dim)
    s = max(1.0, n / train_length)
    if rope in ("none", "rerope") or s == 1.0:
        return theta
    if rope == "pi":
        return theta / s
    if rope in ("ntk", "dynamic_ntk"):
        return (base * s ** (head_dim / (head_dim - 2))) ** (-2.0 * i / head_dim)
    # yarn: correction range in dimension-index units, as in the reference implementation
    def dim_for(rotations):
        return head_dim * math.log(train_length / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(dim_for(32.0)), 0)
    high = min(math.ceil(dim_for(1.0)), head_dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((i - low) / (high - low), 0.0, 1.0)
    extrapolate = 1.0 - ramp  # 1 for fast (high-frequency) dimensions: keep theta
    return theta / s * (1.0 - extrapolate) + theta * extrapolate


def rerope_window(train_length: int) -> int:
    """ReRoPE's window ``w = L // 2`` for a model trained at ``L`` (Su used ``w = 256`` at ``L = 512``)."""
    return check_int(train_length, "train_length", minimum=2) // 2


def rerope_near(query_positions, key_positions, window: int) -> np.ndarray:
    """Where ReRoPE keeps the exact RoPE score: ``|i - j| < window`` for query ``i`` and key ``j`` (bool, ``[q, k]``).

    Su's ReRoPE (kexue.fm/archives/9708; his ``LlamaReRoPE.py``: ``rectified_mask =
    (position_ids[:, -q_len:, None] - position_ids[:, None]).abs() < self.window``) computes two
    score matrices and joins them by this mask:

    - near pairs: ``q`` and ``k`` each rotated at their own positions (relative position ``i - j``);
    - far pairs: ``q`` rotated at position ``window``, ``k`` not rotated (relative position
      ``window`` for every far key).

    So the relative position is ``min(i - j, w)`` for a causal model: every pair within the
    window is the trained RoPE, bit for bit, and no relative position beyond the ones trained
    is ever seen.  Both the JAX model (:mod:`softmax_scale.train.model`) and the numpy decoder
    (:mod:`softmax_scale.models.llama`) join their score matrices with this mask.
    """
    window = check_int(window, "window", minimum=1)
    i = np.asarray(query_positions, dtype=np.int64)
    j = np.asarray(key_positions, dtype=np.int64)
    return np.abs(i[:, None] - j[None, :]) < window

"""Second moments: the note's first part.

Why the attention scale is ``1/sqrt(d)``: keep second moments at 1 from the
initialisation through every layer.  Each topic of the note has a Monte Carlo
estimator with its standard error and, where one exists, the closed form:

1. sampling distributions for weights and ``Var[q·k] = d``
   (:func:`sample_weights`, :func:`dot_product_variance`);
2. initialisation through depth, LeCun/Xavier, He, NTK
   (:func:`depth_second_moments`, :func:`mean_field_second_moments`);
3. activations rescaled to keep the second moment, SELU solved from its
   fixed point (:func:`rescale_activation`, :func:`selu_constants`);
4. LayerNorm against RMSNorm (:func:`layer_norm`, :func:`rms_norm`,
   :func:`normalization_moments`);
5. residuals: plain, Post-Norm, Pre-Norm, SkipInit/ReZero, warm-up
   (:func:`residual_second_moments`);
6. T5's query initialisation folds the ``1/sqrt(d)`` in
   (:func:`t5_score_variance`).

Every estimator takes a keyword-only ``rng`` (anything accepted by
:func:`numpy.random.default_rng`); the same seed gives bit-identical results.
Plain numpy: the work is matrix products, which numba would not speed up.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize, special

from ._random import seed_sequence
from ._validation import check_choice, check_int, check_positive_float

__all__ = [
    "ACTIVATIONS",
    "DISTRIBUTIONS",
    "INITS",
    "NORMS",
    "RESIDUAL_SCHEMES",
    "T5_INITS",
    "TRUNCATION_BOUND",
    "AffineCorrection",
    "DepthMoments",
    "DotProductVariance",
    "NormMoments",
    "ResidualMoments",
    "SeluConstants",
    "T5ScoreVariance",
    "activation",
    "depth_second_moments",
    "dot_product_variance",
    "gaussian_expectation",
    "layer_norm",
    "mean_field_second_moments",
    "normalization_moments",
    "preserving_gain",
    "rescale_activation",
    "residual_second_moments",
    "rms_norm",
    "sample_weights",
    "second_moment_map_slope",
    "selu_constants",
    "t5_score_variance",
    "truncated_normal_std",
    "truncation_correction",
    "warmup_alpha",
]

#: Weight sampling distributions, each with unit variance (after correction).
DISTRIBUTIONS = ("normal", "uniform", "truncated_normal")
#: Activations known by name.
ACTIVATIONS = ("linear", "relu", "tanh", "sigmoid", "shifted_sigmoid", "elu", "selu", "gelu")
#: Initialisations / parameterisations of a dense layer.
INITS = ("lecun", "xavier", "he", "ntk", "preserving")
#: Normalisations.
NORMS = ("layer", "rms")
#: Residual schemes.
RESIDUAL_SCHEMES = ("plain", "post_norm", "pre_norm", "skipinit", "rezero", "warmup")
#: Query/key initialisations for :func:`t5_score_variance`.
T5_INITS = ("t5", "standard")
#: Truncated normal weights are cut at this many standard deviations.
TRUNCATION_BOUND = 2.0

_CHUNK = 1 << 20  # entries drawn at once by the dot-product estimator


def _rng(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(seed_sequence(rng))  # names `rng` in its errors


def _mean_stderr(values: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Mean over independent trials along ``axis`` and its standard error."""
    n = values.shape[axis]
    mean = values.mean(axis=axis)
    stderr = values.std(axis=axis, ddof=1) / math.sqrt(n)
    return mean, stderr


def _check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be True or False, got {value!r}")
    return bool(value)


# ---------------------------------------------------------------------------
# 1. Sampling distributions and Var[q·k]
# ---------------------------------------------------------------------------


def truncated_normal_std(bound: float = TRUNCATION_BOUND) -> float:
    """Return the standard deviation of N(0, 1) truncated to ``[-bound, bound]``.

    Parameters
    ----------
    bound : float
        Truncation point in standard deviations, > 0.

    Returns
    -------
    float
        ``sqrt(1 - 2 b phi(b) / (2 Phi(b) - 1))``; about 0.8796 for ``b = 2``.
    """
    b = check_positive_float(bound, "bound")
    mass = special.erf(b / math.sqrt(2.0))
    pdf = math.exp(-0.5 * b * b) / math.sqrt(2.0 * math.pi)
    return math.sqrt(1.0 - 2.0 * b * pdf / mass)


def truncation_correction(bound: float = TRUNCATION_BOUND) -> float:
    """Factor restoring unit standard deviation after truncation (about 1.137 for 2).

    Parameters
    ----------
    bound : float
        Truncation point in standard deviations, > 0.

    Returns
    -------
    float
        ``1 / truncated_normal_std(bound)``.
    """
    return 1.0 / truncated_normal_std(bound)


def _entry_variance(dist: str, correct_truncation: bool) -> float:
    """Variance of one entry drawn by :func:`sample_weights` with ``std=1``."""
    if dist == "truncated_normal" and not correct_truncation:
        return truncated_normal_std() ** 2
    return 1.0


def sample_weights(shape, dist: str = "normal", *, std: float = 1.0,
                   correct_truncation: bool = True, rng=None) -> np.ndarray:
    """Draw i.i.d. zero-mean weights of standard deviation ``std``.

    Parameters
    ----------
    shape : int or tuple of int
        Output shape.
    dist : {"normal", "uniform", "truncated_normal"}
        ``uniform`` is U(-sqrt(3) std, sqrt(3) std); ``truncated_normal`` is
        N(0, 1) cut at :data:`TRUNCATION_BOUND` standard deviations (drawn by
        inverting the CDF), times :func:`truncation_correction` and ``std``.
    std : float
        Intended standard deviation, > 0.
    correct_truncation : bool
        If False the truncated normal is not rescaled, so its standard
        deviation is ``truncated_normal_std() * std`` (about 0.88 std).
    rng : None, int or numpy.random.Generator
        Random source.

    Returns
    -------
    numpy.ndarray
        float64 array of the given shape.
    """
    check_choice(dist, "dist", DISTRIBUTIONS)
    std = check_positive_float(std, "std")
    correct_truncation = _check_bool(correct_truncation, "correct_truncation")
    gen = _rng(rng)
    if dist == "normal":
        return std * gen.standard_normal(shape)
    if dist == "uniform":
        half = math.sqrt(3.0) * std
        return gen.uniform(-half, half, size=shape)
    lo = special.ndtr(-TRUNCATION_BOUND)
    u = gen.random(shape)
    x = special.ndtri(lo + u * (1.0 - 2.0 * lo))
    factor = truncation_correction() if correct_truncation else 1.0
    return (factor * std) * x


@dataclass(frozen=True)
class DotProductVariance:
    """Monte Carlo estimate of ``Var[q·k]`` for i.i.d. weight-like entries.

    Attributes
    ----------
    d : int
        Dimension of ``q`` and ``k``.
    dist : str
        Entry distribution (see :data:`DISTRIBUTIONS`).
    scaled : bool
        Whether the score is ``q·k / sqrt(d)``.
    correct_truncation : bool
        Whether a truncated normal was rescaled to unit variance.
    trials : int
        Independent ``(q, k)`` pairs.
    estimate : float
        Mean of ``s^2`` over the trials (``E[s] = 0`` by symmetry, so this is
        the variance).
    stderr : float
        Standard error of ``estimate``.
    closed_form : float
        ``d v^2`` (``v^2`` after scaling) with ``v`` the entry variance actually sampled.
    target : float
        What the initialisation intends: ``d``, or 1 when scaled.
    entry_variance : float
        ``v``, the variance of one entry.
    """

    d: int
    dist: str
    scaled: bool
    correct_truncation: bool
    trials: int
    estimate: float
    stderr: float
    closed_form: float
    target: float
    entry_variance: float


def dot_product_variance(d: int, dist: str = "normal", *, trials: int = 20_000,
                         scaled: bool = False, correct_truncation: bool = True,
                         rng=None) -> DotProductVariance:
    """Estimate ``Var[q·k]`` for ``q, k`` with i.i.d. entries of :func:`sample_weights`.

    With unit-variance entries ``Var[q·k] = d``; after dividing by ``sqrt(d)``
    it is 1, which is why attention scales scores by ``1/sqrt(d)``.

    Parameters
    ----------
    d : int
        Dimension, >= 1.
    dist : {"normal", "uniform", "truncated_normal"}
        Entry distribution.
    trials : int
        Independent pairs, >= 2.
    scaled : bool
        Divide the score by ``sqrt(d)``.
    correct_truncation : bool
        Rescale the truncated normal to unit variance (False is the negative control).
    rng : None, int or numpy.random.Generator
        Random source.

    Returns
    -------
    DotProductVariance
        Estimate, standard error and closed form.
    """
    d = check_int(d, "d", minimum=1)
    check_choice(dist, "dist", DISTRIBUTIONS)
    trials = check_int(trials, "trials", minimum=2)
    scaled = _check_bool(scaled, "scaled")
    correct_truncation = _check_bool(correct_truncation, "correct_truncation")
    gen = _rng(rng)
    s2 = np.empty(trials)
    rows = max(1, _CHUNK // d)
    for start in range(0, trials, rows):
        m = min(rows, trials - start)
        q = sample_weights((m, d), dist, correct_truncation=correct_truncation, rng=gen)
        k = sample_weights((m, d), dist, correct_truncation=correct_truncation, rng=gen)
        s = np.einsum("ij,ij->i", q, k)
        if scaled:
            s = s / math.sqrt(d)
        s2[start:start + m] = s * s
    est, se = _mean_stderr(s2)
    v = _entry_variance(dist, correct_truncation)
    factor = 1.0 if scaled else float(d)
    return DotProductVariance(d=d, dist=dist, scaled=scaled, correct_truncation=correct_truncation,
                              trials=trials, estimate=float(est), stderr=float(se),
                              closed_form=factor * v * v, target=factor, entry_variance=v)


# ---------------------------------------------------------------------------
# 3. Activations and their Gaussian moments (used by 2.)
# ---------------------------------------------------------------------------


def _elu(x, alpha: float = 1.0):
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def _gelu(x):
    x = np.asarray(x, dtype=np.float64)
    return 0.5 * x * (1.0 + special.erf(x / math.sqrt(2.0)))


def gaussian_expectation(func, *, variance: float = 1.0) -> float:
    """``E[func(x)]`` for ``x ~ N(0, variance)`` by adaptive quadrature.

    The integral is split at 0 (where ReLU-like functions have a kink) and
    each half is integrated with :func:`scipy.integrate.quad`.

    Parameters
    ----------
    func : callable
        Scalar function of a float.
    variance : float
        Variance of ``x``, > 0.

    Returns
    -------
    float
        The expectation.
    """
    variance = check_positive_float(variance, "variance")
    s = math.sqrt(variance)
    c = 1.0 / math.sqrt(2.0 * math.pi)

    def integrand(z):
        return float(func(s * z)) * c * math.exp(-0.5 * z * z)

    opts = {"epsabs": 0.0, "epsrel": 1e-12, "limit": 200}
    left = integrate.quad(integrand, -np.inf, 0.0, **opts)[0]
    right = integrate.quad(integrand, 0.0, np.inf, **opts)[0]
    return left + right


@dataclass(frozen=True)
class SeluConstants:
    """SELU's constants solved from its fixed-point conditions.

    Attributes
    ----------
    lambda_ : float
        Scale ``lambda`` (about 1.0507).
    alpha : float
        ELU parameter ``alpha`` (about 1.6733).
    mean : float
        ``E[selu(x)]`` at the solution, ``x ~ N(0, 1)`` (should be 0).
    second_moment : float
        ``E[selu(x)^2]`` at the solution (should be 1).
    converged : bool
        Whether the root finder reported success.
    message : str
        The root finder's message.
    """

    lambda_: float
    alpha: float
    mean: float
    second_moment: float
    converged: bool
    message: str


@functools.lru_cache(maxsize=1)
def selu_constants() -> SeluConstants:
    """Solve ``E[lambda elu_alpha(x)] = 0`` and ``E[(lambda elu_alpha(x))^2] = 1``.

    ``x ~ N(0, 1)``; both expectations by quadrature
    (:func:`gaussian_expectation`), the pair of equations by
    :func:`scipy.optimize.root` from ``(1, 1)``.  Nothing is typed in: the
    result recovers Klambauer et al.'s ``lambda ≈ 1.0507`` and
    ``alpha ≈ 1.6733``.

    Returns
    -------
    SeluConstants
        The constants, the moments they give and the solver's status.
    """

    def conditions(p):
        lam, alpha = p
        m1 = gaussian_expectation(lambda x: lam * _elu(x, alpha))
        m2 = gaussian_expectation(lambda x: (lam * _elu(x, alpha)) ** 2)
        return [m1, m2 - 1.0]

    sol = optimize.root(conditions, x0=[1.0, 1.0], method="hybr", tol=1e-14)
    lam, alpha = (float(v) for v in sol.x)
    m1, m2 = conditions(sol.x)
    return SeluConstants(lambda_=lam, alpha=alpha, mean=m1, second_moment=m2 + 1.0,
                         converged=bool(sol.success), message=str(sol.message))


def _selu(x):
    c = selu_constants()
    return c.lambda_ * _elu(x, c.alpha)


@functools.lru_cache(maxsize=1)
def _sigmoid_affine() -> tuple[float, float]:
    mean = gaussian_expectation(special.expit)
    var = gaussian_expectation(lambda x: (special.expit(x) - mean) ** 2)
    scale = 1.0 / math.sqrt(var)
    return scale, -scale * mean


def _shifted_sigmoid(x):
    a, b = _sigmoid_affine()
    return a * special.expit(np.asarray(x, dtype=np.float64)) + b


_ACTIVATION_FUNCS = {
    "linear": lambda x: np.asarray(x, dtype=np.float64),
    "relu": lambda x: np.maximum(np.asarray(x, dtype=np.float64), 0.0),
    "tanh": lambda x: np.tanh(np.asarray(x, dtype=np.float64)),
    "sigmoid": lambda x: special.expit(np.asarray(x, dtype=np.float64)),
    "shifted_sigmoid": _shifted_sigmoid,
    "elu": _elu,
    "selu": _selu,
    "gelu": _gelu,
}


def activation(x, name: str) -> np.ndarray:
    """Apply the activation ``name`` elementwise.

    Parameters
    ----------
    x : array_like
        Input.
    name : str
        One of :data:`ACTIVATIONS`.  ``shifted_sigmoid`` is
        ``a (sigmoid(x) - 1/2)`` rescaled by :func:`rescale_activation` to zero
        mean and unit second moment for ``x ~ N(0, 1)``; ``selu`` uses
        :func:`selu_constants`; ``elu`` has ``alpha = 1``.

    Returns
    -------
    numpy.ndarray
        float64 array.
    """
    check_choice(name, "name", ACTIVATIONS)
    return _ACTIVATION_FUNCS[name](x)


@dataclass(frozen=True)
class AffineCorrection:
    """Affine correction ``scale f(x) + shift`` of an activation.

    Attributes
    ----------
    activation : str
        Name of ``f``.
    scale : float
        ``a``.
    shift : float
        ``b``.
    mean : float
        ``E[f(x)]`` for ``x ~ N(0, 1)`` before correction.
    second_moment : float
        ``E[f(x)^2]`` before correction.
    gain : float
        ``1 / sqrt(E[f(x)^2])``: the scale alone (no shift) giving unit second moment.
    centered : bool
        Whether ``shift`` removes the mean (else ``shift = 0`` and ``scale = gain``).
    """

    activation: str
    scale: float
    shift: float
    mean: float
    second_moment: float
    gain: float
    centered: bool

    def __call__(self, x) -> np.ndarray:
        """Apply the corrected activation."""
        return self.scale * activation(x, self.activation) + self.shift


def rescale_activation(name: str, *, center: bool = True) -> AffineCorrection:
    """Find ``a f(x) + b`` with ``E[.] = 0`` and ``E[.^2] = 1`` for ``x ~ N(0, 1)``.

    Parameters
    ----------
    name : str
        One of :data:`ACTIVATIONS`.
    center : bool
        If True remove the mean (``a = 1/std``, ``b = -a E[f]``); if False only
        rescale (``a = gain``, ``b = 0``) so that the second moment is 1.

    Returns
    -------
    AffineCorrection
        The correction, callable.

    Notes
    -----
    For the sigmoid, ``E[sigmoid(x)] = 1/2`` and ``Var ≈ 0.0434``, so
    ``4.80 (sigmoid(x) - 1/2)`` keeps the second moment at 1.
    """
    check_choice(name, "name", ACTIVATIONS)
    center = _check_bool(center, "center")
    f = _ACTIVATION_FUNCS[name]
    mean = gaussian_expectation(f)
    m2 = gaussian_expectation(lambda x: f(x) ** 2)
    gain = 1.0 / math.sqrt(m2)
    if center:
        scale = 1.0 / math.sqrt(m2 - mean * mean)
        shift = -scale * mean
    else:
        scale, shift = gain, 0.0
    return AffineCorrection(activation=name, scale=scale, shift=shift, mean=mean,
                            second_moment=m2, gain=gain, centered=center)


def preserving_gain(name: str) -> float:
    """Weight gain ``g`` (std ``g/sqrt(fan_in)``) keeping pre-activations at unit second moment.

    ``g = 1 / sqrt(E[f(x)^2])`` for ``x ~ N(0, 1)``: sqrt(2) for ReLU (He),
    1 for linear, SELU and the shifted sigmoid.

    Parameters
    ----------
    name : str
        One of :data:`ACTIVATIONS`.

    Returns
    -------
    float
        The gain.
    """
    check_choice(name, "name", ACTIVATIONS)
    return _preserving_gain(name)


@functools.cache
def _preserving_gain(name: str) -> float:
    f = _ACTIVATION_FUNCS[name]
    return 1.0 / math.sqrt(gaussian_expectation(lambda x: f(x) ** 2))


# ---------------------------------------------------------------------------
# 2. Initialisation through depth
# ---------------------------------------------------------------------------


def _init_gain(init: str, act: str) -> float:
    """Weight std times sqrt(fan_in) for square layers."""
    if init in ("lecun", "xavier", "ntk"):
        return 1.0  # Xavier's 2/(fan_in+fan_out) equals 1/fan_in for square layers
    if init == "he":
        return math.sqrt(2.0)
    return _preserving_gain(act)


def mean_field_second_moments(depth: int, activation: str = "relu", init: str = "lecun") -> np.ndarray:
    """Infinite-width recursion for the pre-activation second moment.

    ``q_0 = 1`` and ``q_l = g^2 E[f(sqrt(q_{l-1}) z)^2]``, ``z ~ N(0, 1)``.  For
    linear and ReLU (positively homogeneous) it is exact in expectation at
    any width: ``q_l = (g^2 c)^l`` with ``c = 1`` and ``1/2``.

    Parameters
    ----------
    depth : int
        Number of layers, >= 1.
    activation : str
        One of :data:`ACTIVATIONS`.
    init : str
        One of :data:`INITS`.

    Returns
    -------
    numpy.ndarray
        ``q_0, ..., q_depth``.
    """
    depth = check_int(depth, "depth", minimum=1)
    check_choice(activation, "activation", ACTIVATIONS)
    check_choice(init, "init", INITS)
    g2 = _init_gain(init, activation) ** 2
    f = _ACTIVATION_FUNCS[activation]
    q = np.empty(depth + 1)
    q[0] = 1.0
    homogeneous = {"linear": 1.0, "relu": 0.5}
    for layer in range(1, depth + 1):
        if activation in homogeneous:
            q[layer] = g2 * homogeneous[activation] * q[layer - 1]
        else:
            q[layer] = g2 * gaussian_expectation(lambda x: f(x) ** 2, variance=q[layer - 1])
    return q


def second_moment_map_slope(activation: str = "relu", init: str = "preserving", *,
                            q: float = 1.0) -> float:
    """Slope of the layer-to-layer map ``q -> g^2 E[f(sqrt(q) z)^2]`` at ``q``.

    Below 1 the fixed point is stable (tanh, SELU, the shifted sigmoid with
    their preserving gains); 1 is neutral (linear, ReLU); above 1 the second
    moment drifts away from it at finite width (GELU's preserving gain, 1.144).

    Parameters
    ----------
    activation : str
        One of :data:`ACTIVATIONS`.
    init : str
        One of :data:`INITS`.
    q : float
        Second moment where the slope is taken, > 0.

    Returns
    -------
    float
        The derivative, by a central difference of quadratures (about 8 digits).
    """
    check_choice(activation, "activation", ACTIVATIONS)
    check_choice(init, "init", INITS)
    q = check_positive_float(q, "q")
    g2 = _init_gain(init, activation) ** 2
    f = _ACTIVATION_FUNCS[activation]
    h = 1e-4 * q
    up = gaussian_expectation(lambda x: f(x) ** 2, variance=q + h)
    down = gaussian_expectation(lambda x: f(x) ** 2, variance=q - h)
    return g2 * (up - down) / (2.0 * h)


@dataclass(frozen=True)
class DepthMoments:
    """Second moments through a stack of dense layers at initialisation.

    Layer ``l`` computes ``h_l = W_l f(h_{l-1})``; the input ``h_0 = x`` has
    i.i.d. N(0, 1) entries.  Arrays are indexed by layer ``0..depth``.

    Attributes
    ----------
    activation, init : str
        The activation ``f`` and the initialisation.
    width, depth, trials, inputs : int
        Layer width, number of layers, independent networks, inputs per network.
    gain : float
        Weight std times ``sqrt(fan_in)`` (for NTK, the output multiplier times ``sqrt(fan_in)``).
    layers : numpy.ndarray
        ``0, ..., depth``.
    second_moment, stderr : numpy.ndarray
        ``E[h_l^2]`` (pre-activations) and its standard error over networks.
    post_second_moment, post_stderr : numpy.ndarray
        ``E[f(h_l)^2]`` and its standard error.
    predicted : numpy.ndarray
        :func:`mean_field_second_moments`.
    exact : bool
        Whether ``predicted`` is exact in expectation at finite width
        (linear, ReLU); otherwise it is the infinite-width limit.
    """

    activation: str
    init: str
    width: int
    depth: int
    trials: int
    inputs: int
    gain: float
    layers: np.ndarray
    second_moment: np.ndarray
    stderr: np.ndarray
    post_second_moment: np.ndarray
    post_stderr: np.ndarray
    predicted: np.ndarray
    exact: bool


def depth_second_moments(depth: int, activation: str = "relu", init: str = "he", *,
                         width: int = 128, trials: int = 32, inputs: int = 8,
                         rng=None) -> DepthMoments:
    """Monte Carlo second moment of every layer of a random dense network.

    Weights are Gaussian with std ``gain/sqrt(fan_in)``: ``lecun`` (and
    ``xavier``, identical for square layers) gain 1, ``he`` gain sqrt(2),
    ``preserving`` :func:`preserving_gain`; ``ntk`` draws N(0, 1) weights and
    multiplies the layer output by ``1/sqrt(fan_in)``.  LeCun on ReLU
    vanishes like ``2^-l``, He on linear explodes like ``2^l``, the
    activation's own gain keeps 1.

    Parameters
    ----------
    depth : int
        Number of layers, >= 1.
    activation : str
        One of :data:`ACTIVATIONS`.
    init : str
        One of :data:`INITS`.
    width : int
        Width of every layer, >= 1.
    trials : int
        Independent networks, >= 2.
    inputs : int
        Independent inputs per network, >= 1.
    rng : None, int or numpy.random.Generator
        Random source.

    Returns
    -------
    DepthMoments
        Per-layer second moments with standard errors and the prediction.
    """
    depth = check_int(depth, "depth", minimum=1)
    check_choice(activation, "activation", ACTIVATIONS)
    check_choice(init, "init", INITS)
    width = check_int(width, "width", minimum=1)
    trials = check_int(trials, "trials", minimum=2)
    inputs = check_int(inputs, "inputs", minimum=1)
    gen = _rng(rng)
    f = _ACTIVATION_FUNCS[activation]
    gain = _init_gain(init, activation)
    pre = np.empty((trials, depth + 1))
    post = np.empty((trials, depth + 1))
    for t in range(trials):
        h = gen.standard_normal((width, inputs))
        a = f(h)
        pre[t, 0], post[t, 0] = np.mean(h * h), np.mean(a * a)
        for layer in range(1, depth + 1):
            w = gen.standard_normal((width, width))
            if init == "ntk":
                h = (w @ a) * (gain / math.sqrt(width))
            else:
                h = (w * (gain / math.sqrt(width))) @ a
            a = f(h)
            pre[t, layer], post[t, layer] = np.mean(h * h), np.mean(a * a)
    m, se = _mean_stderr(pre)
    pm, pse = _mean_stderr(post)
    return DepthMoments(activation=activation, init=init, width=width, depth=depth,
                        trials=trials, inputs=inputs, gain=gain,
                        layers=np.arange(depth + 1), second_moment=m, stderr=se,
                        post_second_moment=pm, post_stderr=pse,
                        predicted=mean_field_second_moments(depth, activation, init),
                        exact=activation in ("linear", "relu"))


# ---------------------------------------------------------------------------
# 4. Normalisation
# ---------------------------------------------------------------------------


def layer_norm(x, *, axis: int = -1, eps: float = 0.0) -> np.ndarray:
    """LayerNorm without learned parameters: ``(x - mean) / sqrt(var + eps)``.

    Parameters
    ----------
    x : array_like
        Input.
    axis : int
        Axis normalised over.
    eps : float
        Added to the variance, >= 0.

    Returns
    -------
    numpy.ndarray
        Mean 0 and variance ``var/(var + eps)`` (1 for ``eps = 0``) along ``axis``.
    """
    eps = check_positive_float(eps, "eps", allow_zero=True)
    x, axis = _check_norm_input(x, axis)
    centred = x - x.mean(axis=axis, keepdims=True)
    var = np.mean(centred * centred, axis=axis, keepdims=True)
    if eps == 0.0 and np.any(var == 0.0):
        raise ValueError("`x` has zero variance along `axis`: LayerNorm is undefined there; pass `eps` > 0")
    return centred / np.sqrt(var + eps)


def _check_norm_input(x, axis):
    """``x`` as a finite, non-empty float64 array and ``axis`` as a valid integer axis."""
    arr = np.asarray(x)
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise TypeError(f"`x` must be an array of real numbers, got {x!r}")
    if arr.size == 0 or arr.ndim == 0:
        raise ValueError(f"`x` must be a non-empty array with at least one axis, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("`x` must be finite (no NaN or inf)")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"`axis` must be an integer, got {axis!r}")
    if not -arr.ndim <= axis < arr.ndim:
        raise ValueError(f"`axis` must be in [{-arr.ndim}, {arr.ndim - 1}] for `x` of shape {arr.shape}, got {axis}")
    return arr.astype(np.float64), int(axis)


def rms_norm(x, *, axis: int = -1, eps: float = 0.0) -> np.ndarray:
    """RMSNorm without learned parameters: ``x / sqrt(mean(x^2) + eps)``; no centring.

    Parameters
    ----------
    x : array_like
        Input.
    axis : int
        Axis normalised over.
    eps : float
        Added to the mean square, >= 0.

    Returns
    -------
    numpy.ndarray
        Second moment 1 (for ``eps = 0``) along ``axis``; the mean is kept, shrunk.
    """
    eps = check_positive_float(eps, "eps", allow_zero=True)
    x, axis = _check_norm_input(x, axis)
    ms = np.mean(x * x, axis=axis, keepdims=True)
    if eps == 0.0 and np.any(ms == 0.0):
        raise ValueError("`x` is zero along `axis`: RMSNorm is undefined there; pass `eps` > 0")
    return x / np.sqrt(ms + eps)


_NORM_FUNCS = {"layer": layer_norm, "rms": rms_norm}


@dataclass(frozen=True)
class NormMoments:
    """Moments of a normalised vector with i.i.d. N(``input_mean``, ``input_std``²) entries.

    Per-vector statistics (over the ``width`` units) are averaged over trials.

    Attributes
    ----------
    norm : str
        ``layer`` or ``rms``.
    width, trials : int
        Vector length and number of vectors.
    input_mean, input_std : float
        Distribution of the input entries.
    mean, mean_stderr : float
        Per-vector mean of the output, and its standard error.
    variance, variance_stderr : float
        Per-vector variance (``ddof = 0``) of the output.
    second_moment, second_moment_stderr : float
        Per-vector mean square of the output.
    closed_form_mean, closed_form_variance, closed_form_second_moment : float
        LayerNorm: 0, 1, 1 exactly.  RMSNorm: second moment 1 exactly; mean
        ``mu/sqrt(mu^2 + sigma^2)`` and variance ``sigma^2/(mu^2 + sigma^2)``
        in the limit of large width.
    """

    norm: str
    width: int
    trials: int
    input_mean: float
    input_std: float
    mean: float
    mean_stderr: float
    variance: float
    variance_stderr: float
    second_moment: float
    second_moment_stderr: float
    closed_form_mean: float
    closed_form_variance: float
    closed_form_second_moment: float


def normalization_moments(norm: str = "layer", *, width: int = 1024, mean: float = 0.5,
                          std: float = 1.0, trials: int = 256, rng=None) -> NormMoments:
    """Monte Carlo moments of :func:`layer_norm` or :func:`rms_norm` output.

    LayerNorm fixes mean 0 and variance 1; RMSNorm fixes the second moment
    at 1 and keeps (a shrunk) mean.

    Parameters
    ----------
    norm : {"layer", "rms"}
        Normalisation.
    width : int
        Vector length, >= 2.
    mean : float
        Mean of the input entries (finite).
    std : float
        Standard deviation of the input entries, > 0.
    trials : int
        Independent vectors, >= 2.
    rng : None, int or numpy.random.Generator
        Random source.

    Returns
    -------
    NormMoments
        Estimates, standard errors and closed forms.
    """
    check_choice(norm, "norm", NORMS)
    width = check_int(width, "width", minimum=2)
    mu = float(mean)
    if not math.isfinite(mu):
        raise ValueError(f"`mean` must be a finite number, got {mean!r}")
    sigma = check_positive_float(std, "std")
    trials = check_int(trials, "trials", minimum=2)
    gen = _rng(rng)
    x = mu + sigma * gen.standard_normal((trials, width))
    y = _NORM_FUNCS[norm](x)
    m = y.mean(axis=1)
    v = y.var(axis=1)
    s = np.mean(y * y, axis=1)
    (m, mse), (v, vse), (s, sse) = (_mean_stderr(a) for a in (m, v, s))
    if norm == "layer":
        cf_m, cf_v = 0.0, 1.0
    else:
        r = mu * mu + sigma * sigma
        cf_m, cf_v = mu / math.sqrt(r), sigma * sigma / r
    return NormMoments(norm=norm, width=width, trials=trials, input_mean=mu, input_std=sigma,
                       mean=float(m), mean_stderr=float(mse), variance=float(v),
                       variance_stderr=float(vse), second_moment=float(s),
                       second_moment_stderr=float(sse), closed_form_mean=cf_m,
                       closed_form_variance=cf_v, closed_form_second_moment=1.0)


# ---------------------------------------------------------------------------
# 5. Residuals
# ---------------------------------------------------------------------------


def warmup_alpha(step, warmup_steps: int) -> float | np.ndarray:
    """Linear warm-up ``alpha_t = min(1, step / warmup_steps)`` for ``x + alpha_t F(x)``.

    Parameters
    ----------
    step : int or array_like of int
        Training step(s), >= 0.
    warmup_steps : int
        Steps to reach 1, >= 1.

    Returns
    -------
    float or numpy.ndarray
        ``alpha_t`` in ``[0, 1]``.
    """
    warmup_steps = check_int(warmup_steps, "warmup_steps", minimum=1)
    t = np.asarray(step, dtype=np.float64)
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValueError(f"`step` must be >= 0, got {step!r}")
    a = np.minimum(1.0, t / warmup_steps)
    return float(a) if a.ndim == 0 else a


@dataclass(frozen=True)
class ResidualMoments:
    """Second moment of the residual stream ``x_l`` through depth at initialisation.

    Arrays of length ``depth + 1`` are indexed by layer ``0..depth``; arrays
    of length ``depth`` by the block ``1..depth``.

    Attributes
    ----------
    scheme : str
        One of :data:`RESIDUAL_SCHEMES`.
    depth, width, trials, inputs : int
        Blocks, width, independent networks, inputs per network.
    alpha : float
        Branch multiplier (1 for plain, Post-Norm and Pre-Norm).
    layers : numpy.ndarray
        ``0, ..., depth``.
    second_moment, stderr : numpy.ndarray
        ``E[x_l^2]`` per entry and its standard error.
    closed_form : numpy.ndarray
        Plain ``2^l``; Post-Norm 1 (for ``l >= 1``); Pre-Norm ``1 + l``;
        SkipInit/ReZero/warm-up ``(1 + alpha^2)^l``.  Exact in expectation.
    update_ratio, update_stderr : numpy.ndarray
        ``|x_l - x_{l-1}| / |x_{l-1}|``, the relative size of block ``l``'s
        update, and its standard error (length ``depth``).
    input_cosine, input_cosine_stderr : numpy.ndarray
        Cosine between ``x_l`` and ``x_0``: how much of the identity path survives.
    """

    scheme: str
    depth: int
    width: int
    trials: int
    inputs: int
    alpha: float
    layers: np.ndarray
    second_moment: np.ndarray
    stderr: np.ndarray
    closed_form: np.ndarray
    update_ratio: np.ndarray
    update_stderr: np.ndarray
    input_cosine: np.ndarray
    input_cosine_stderr: np.ndarray


def residual_second_moments(depth: int, scheme: str = "plain", *, width: int = 128,
                            branch: str = "linear", norm: str = "layer", alpha: float = 0.0,
                            step: int = 0, warmup_steps: int = 1000, trials: int = 32,
                            inputs: int = 8, rng=None) -> ResidualMoments:
    """Monte Carlo second moment of a residual stream through ``depth`` blocks.

    Schemes, with ``F`` a random branch whose output has the second moment of
    its input and is uncorrelated with it:

    - ``plain``: ``x + F(x)``, second moment doubles per block (``2^l``);
    - ``post_norm``: ``Norm(x + F(x))``, stays at 1 but the identity path
      shrinks by ``1/sqrt(2)`` per block;
    - ``pre_norm``: ``x + F(Norm(x))``, grows linearly (``1 + l``);
    - ``skipinit``/``rezero``: ``x + alpha F(x)`` (identical forward pass;
      ``alpha = 0`` at initialisation), ``(1 + alpha^2)^l``;
    - ``warmup``: ``x + alpha_t F(x)`` with ``alpha_t = warmup_alpha(step, warmup_steps)``.

    Parameters
    ----------
    depth : int
        Number of blocks, >= 1.
    scheme : str
        One of :data:`RESIDUAL_SCHEMES`.
    width : int
        Width of the stream, >= 1 (>= 2 for the norm schemes).
    branch : {"linear", "mlp"}
        ``F(x) = W x`` with LeCun weights, or ``W2 relu(W1 x)`` with He then LeCun.
    norm : {"layer", "rms"}
        Normalisation used by ``post_norm`` and ``pre_norm``.
    alpha : float
        Branch multiplier for ``skipinit``/``rezero``, >= 0.
    step, warmup_steps : int
        Training step and warm-up length for ``warmup``.
    trials : int
        Independent networks, >= 2.
    inputs : int
        Independent inputs per network, >= 1.
    rng : None, int or numpy.random.Generator
        Random source.

    Returns
    -------
    ResidualMoments
        Per-layer second moments, update sizes and closed forms.
    """
    depth = check_int(depth, "depth", minimum=1)
    check_choice(scheme, "scheme", RESIDUAL_SCHEMES)
    uses_norm = scheme in ("post_norm", "pre_norm")
    width = check_int(width, "width", minimum=2 if uses_norm else 1)
    check_choice(branch, "branch", ("linear", "mlp"))
    check_choice(norm, "norm", NORMS)
    alpha = check_positive_float(alpha, "alpha", allow_zero=True)
    trials = check_int(trials, "trials", minimum=2)
    inputs = check_int(inputs, "inputs", minimum=1)
    if scheme == "warmup":
        step = check_int(step, "step", minimum=0)
        alpha = warmup_alpha(step, warmup_steps)
    elif scheme not in ("skipinit", "rezero"):
        alpha = 1.0
    gen = _rng(rng)
    normalise = _NORM_FUNCS[norm]
    scale = 1.0 / math.sqrt(width)

    def branch_fn(x):
        w = gen.standard_normal((width, width)) * scale
        if branch == "linear":
            return w @ x
        hidden = np.maximum(math.sqrt(2.0) * (w @ x), 0.0)
        w2 = gen.standard_normal((width, width)) * scale
        return w2 @ hidden

    sm = np.empty((trials, depth + 1))
    upd = np.empty((trials, depth))
    cos = np.empty((trials, depth + 1))
    for t in range(trials):
        x0 = gen.standard_normal((width, inputs))
        x = x0
        n0 = np.sqrt(np.sum(x0 * x0, axis=0))
        sm[t, 0], cos[t, 0] = np.mean(x * x), 1.0
        for layer in range(1, depth + 1):
            if scheme == "post_norm":
                new = normalise(x + branch_fn(x), axis=0)
            elif scheme == "pre_norm":
                new = x + branch_fn(normalise(x, axis=0))
            else:
                new = x + alpha * branch_fn(x)
            diff = new - x
            nx = np.sqrt(np.sum(x * x, axis=0))
            upd[t, layer - 1] = np.mean(np.sqrt(np.sum(diff * diff, axis=0)) / nx)
            x = new
            nx = np.sqrt(np.sum(x * x, axis=0))
            sm[t, layer] = np.mean(x * x)
            cos[t, layer] = np.mean(np.sum(x * x0, axis=0) / (nx * n0))
    layers = np.arange(depth + 1)
    if scheme == "plain":
        cf = 2.0 ** layers
    elif scheme == "post_norm":
        cf = np.ones(depth + 1)
    elif scheme == "pre_norm":
        cf = 1.0 + layers
    else:
        cf = (1.0 + alpha * alpha) ** layers
    m, se = _mean_stderr(sm)
    u, use = _mean_stderr(upd)
    c, cse = _mean_stderr(cos)
    return ResidualMoments(scheme=scheme, depth=depth, width=width, trials=trials,
                           inputs=inputs, alpha=float(alpha), layers=layers,
                           second_moment=m, stderr=se, closed_form=cf.astype(np.float64),
                           update_ratio=u, update_stderr=use, input_cosine=c,
                           input_cosine_stderr=cse)


# ---------------------------------------------------------------------------
# 6. T5
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class T5ScoreVariance:
    """Monte Carlo ``Var[q·k]`` of unscaled attention scores at initialisation.

    Attributes
    ----------
    init : str
        ``t5`` or ``standard``.
    d_model, d_kv, trials, pairs : int
        Model width, head dimension, independent weight draws, token pairs per draw.
    query_std, key_std : float
        Standard deviations of the query and key weights.
    estimate, stderr : float
        ``E[s^2]`` (``E[s] = 0`` by symmetry) over weights and inputs, and its
        standard error over weight draws.
    closed_form : float
        ``d_kv (d_model query_std^2) (d_model key_std^2)``: 1 for T5, ``d_kv`` for standard.
    """

    init: str
    d_model: int
    d_kv: int
    trials: int
    pairs: int
    query_std: float
    key_std: float
    estimate: float
    stderr: float
    closed_form: float


def t5_score_variance(d_model: int, d_kv: int, *, init: str = "t5", trials: int = 2000,
                      pairs: int = 8, rng=None) -> T5ScoreVariance:
    """Variance of the unscaled score ``q·k`` under T5's or the standard initialisation.

    Inputs ``x, y`` (two tokens) have i.i.d. N(0, 1) entries, ``q = x W_q``,
    ``k = y W_k``.  T5 draws ``W_q`` with std ``(d_model d_kv)^(-1/2)`` and
    ``W_k`` with std ``d_model^(-1/2)``, so ``Var[q·k] = 1`` without dividing
    by ``sqrt(d_kv)``; the standard ``d_model^(-1/2)`` on both gives ``d_kv``.

    Parameters
    ----------
    d_model : int
        Input width, >= 1.
    d_kv : int
        Head dimension, >= 1.
    init : {"t5", "standard"}
        Query/key initialisation.
    trials : int
        Independent weight draws, >= 2.
    pairs : int
        Token pairs per weight draw, >= 1.
    rng : None, int or numpy.random.Generator
        Random source.

    Returns
    -------
    T5ScoreVariance
        Estimate, standard error and closed form.
    """
    d_model = check_int(d_model, "d_model", minimum=1)
    d_kv = check_int(d_kv, "d_kv", minimum=1)
    check_choice(init, "init", T5_INITS)
    trials = check_int(trials, "trials", minimum=2)
    pairs = check_int(pairs, "pairs", minimum=1)
    gen = _rng(rng)
    key_std = 1.0 / math.sqrt(d_model)
    query_std = key_std / math.sqrt(d_kv) if init == "t5" else key_std
    per = np.empty(trials)
    for t in range(trials):
        wq = gen.standard_normal((d_model, d_kv)) * query_std
        wk = gen.standard_normal((d_model, d_kv)) * key_std
        x = gen.standard_normal((pairs, d_model))
        y = gen.standard_normal((pairs, d_model))
        s = np.einsum("ij,ij->i", x @ wq, y @ wk)
        per[t] = np.mean(s * s)
    est, se = _mean_stderr(per)
    cf = d_kv * (d_model * query_std**2) * (d_model * key_std**2)
    return T5ScoreVariance(init=init, d_model=d_model, d_kv=d_kv, trials=trials, pairs=pairs,
                           query_std=query_std, key_std=key_std, estimate=float(est),
                           stderr=float(se), closed_form=float(cf))

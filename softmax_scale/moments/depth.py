"""Activations and their Gaussian moments, and initialisation through depth (LeCun/Xavier, He, NTK)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize, special

from .._util.rng import generator, mean_stderr
from .._util.validation import check_bool, check_choice, check_int, check_positive_float

__all__ = [
    "ACTIVATIONS",
    "INITS",
    "AffineCorrection",
    "DepthMoments",
    "SeluConstants",
    "activation",
    "depth_second_moments",
    "gaussian_expectation",
    "mean_field_second_moments",
    "preserving_gain",
    "rescale_activation",
    "second_moment_map_slope",
    "selu_constants",
]

#: Activations known by name.
ACTIVATIONS = ("linear", "relu", "tanh", "sigmoid", "shifted_sigmoid", "elu", "selu", "gelu")
#: Initialisations / parameterisations of a dense layer.
INITS = ("lecun", "xavier", "he", "ntk", "preserving")


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
    center = check_bool(center, "center")
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
    gen = generator(rng)
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
    m, se = mean_stderr(pre)
    pm, pse = mean_stderr(post)
    return DepthMoments(activation=activation, init=init, width=width, depth=depth,
                        trials=trials, inputs=inputs, gain=gain,
                        layers=np.arange(depth + 1), second_moment=m, stderr=se,
                        post_second_moment=pm, post_stderr=pse,
                        predicted=mean_field_second_moments(depth, activation, init),
                        exact=activation in ("linear", "relu"))



"""What a config says about the scale in front of the softmax: :class:`ModelScaling` and its parts.

The records :func:`~.config.read_config` returns, and the keys and RoPE types the reader knows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["KNOWN_KEYS", "LAYER_TYPES", "LENGTH_KEYS", "ROPE_NUMBER_KEYS", "ROPE_OTHER_KEYS", "ROPE_TYPES", "ROPE_VARIANTS",
           "ModelScaling", "RopeScaling", "TemperatureRule"]

#: RoPE-scaling keys the reader knows (``rope_scaling`` / ``rope_parameters``), numeric ones first.
ROPE_NUMBER_KEYS = ("factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "attn_factor",
                    "extrapolation_factor", "low_freq_factor", "high_freq_factor", "short_mscale", "long_mscale")
ROPE_OTHER_KEYS = ("rope_type", "type", "original_max_position_embeddings", "truncate", "rope_theta",
                   "partial_rotary_factor", "short_factor", "long_factor", "apply_yarn_scaling", "mrope_section",
                   "mrope_interleaved", "llama_4_scaling_beta")
#: Top-level keys the reader reads or knows to leave the multiplier on q.k alone.
KNOWN_KEYS = frozenset({
    "head_dim", "hidden_size", "num_attention_heads", "num_hidden_layers", "qk_nope_head_dim", "qk_rope_head_dim",
    "query_pre_attn_scalar", "attention_multiplier", "softmax_scale", "max_position_embeddings",
    "original_max_position_embeddings", "seq_length", "rope_scaling", "rope_parameters", "use_logn_attn",
    "attn_temperature_tuning", "floor_scale", "attn_scale", "no_rope_layers", "no_rope_layer_interval",
    "model_type", "text_config", "rope_theta", "partial_rotary_factor", "rope_interleave", "use_dynamic_ntk",
    "rope_local_base_freq", "embedding_multiplier", "residual_multiplier", "logits_scaling", "scale_embedding",
    "attn_logit_softcapping", "final_logit_softcapping", "rotary_emb_base", "rotary_pct", "routed_scaling_factor",
    "llama_4_scaling", "layer_types", "architectures",
})
#: The ``rope_type`` values the engines' rules here know (``mrope``: Qwen2-VL's sections, the default frequencies).
#: Any other is an unknown key, listed first in :attr:`ModelScaling.unknown_keys`.
ROPE_TYPES = frozenset({"default", "linear", "dynamic", "yarn", "longrope", "llama3", "deepseek_yarn", "telechat3-yarn",
                        "mrope"})
#: The ``layer_types`` entries the engines' rules here know; any other is listed in :attr:`ModelScaling.unknown_keys`.
LAYER_TYPES = frozenset({"full_attention", "sliding_attention", "chunked_attention", "linear_attention"})
#: Keys that hold a length in tokens: an integer >= 2 (a length of 1 has no positions to scale).
LENGTH_KEYS = frozenset({"original_max_position_embeddings", "seq_length", "max_position_embeddings"})
#: HF ``rope_type`` -> the toolkit's RoPE variant of the same frequencies (:data:`~softmax_scale.schemes.rope.ROPES`).
ROPE_VARIANTS = {"default": "none", "linear": "pi", "dynamic": "dynamic_ntk", "yarn": "yarn"}


@dataclass(frozen=True)
class RopeScaling:
    """The RoPE scaling keys of a config, as set (``None``: absent).

    Attributes
    ----------
    rope_type : str
        ``"default"`` when the config has no scaling, else ``rope_type`` (or the older ``type``).
    factor, original_max_position_embeddings, beta_fast, beta_slow, mscale, mscale_all_dim, \
attention_factor, attn_factor, truncate
        The keys of the same names.
    values : Mapping
        Every key of the RoPE dict as given (read-only).
    """

    rope_type: str = "default"
    factor: float | None = None
    original_max_position_embeddings: int | None = None
    beta_fast: float | None = None
    beta_slow: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    attn_factor: float | None = None
    truncate: bool | None = None
    values: Mapping = field(default_factory=dict)


@dataclass(frozen=True)
class TemperatureRule:
    """A per-position rule on the query, with the layers it applies to.

    Attributes
    ----------
    scheme : str
        The registry scheme whose formula it is (``"qwen_logn"``, ``"llama4"``).
    params : Mapping
        The scheme's parameters read from the config (e.g. ``train_length``, ``floor_scale``).
    layers : tuple of int or None
        0-based layer indices it applies to; ``None``: every layer.
    keys : tuple of str
        The config keys that set it.
    shift : int
        0: the formula reads the number of keys ``n``; 1: it reads the 0-based position
        ``p = n - 1`` in its place (Mistral's ``floor(p / original_max_position_embeddings)``).
    """

    scheme: str
    params: Mapping
    layers: tuple | None
    keys: tuple
    shift: int = 0

    @property
    def key(self) -> str:
        """The config key that switches it on (``use_logn_attn``, ``attn_temperature_tuning``, ``...llama_4_scaling_beta``)."""
        return self.keys[0]

    @property
    def name(self) -> str:
        """Which rule it is: ``"qwen_logn"``, ``"llama4_temperature"`` or ``"llama_4_scaling_beta"``."""
        if self.scheme == "qwen_logn":
            return "qwen_logn"
        return "llama4_temperature" if self.key == "attn_temperature_tuning" else "llama_4_scaling_beta"


@dataclass(frozen=True)
class ModelScaling:
    """What a config says about the scale in front of the softmax.

    Attributes
    ----------
    source : str
        The file read, or ``"<dict>"``.
    format : {"hf", "gguf"}
        The config's format.
    model_type : str
        ``model_type`` (HF) or ``general.architecture`` (GGUF).
    head_dim : int
        Dimension of ``q.k`` (MLA: ``qk_nope_head_dim + qk_rope_head_dim``).
    rope_dim : int
        Dimensions of ``q.k`` that RoPE rotates (MLA: ``qk_rope_head_dim``; else ``head_dim``).
    n_layers : int or None
        ``num_hidden_layers`` / ``block_count``.
    base_scale : float
        The scale on ``q.k`` without any RoPE or temperature rule.
    base_key : str
        What sets it: ``"head_dim"`` (``1/sqrt(head_dim)``), ``"query_pre_attn_scalar"``,
        ``"attention_multiplier"`` or ``"softmax_scale"``.
    train_length : int or None
        The training length ``L``; ``train_length_key`` names the key it was read from.
    train_length_key : str
    max_position_embeddings : int or None
    hidden_size, num_attention_heads : int or None
    rope : RopeScaling
    temperatures : tuple of TemperatureRule
    set_keys : tuple of str
        Every scaling key the config sets, spelled as in the file (``rope_scaling.factor``).
    unknown_keys : tuple of str
        The scaling keys among them the reader does not know.
    dynamic_ntk : bool
        Qwen (v1)'s ``use_dynamic_ntk``.
    rope_layers : tuple of int or None
        0-based layers the RoPE scaling keys apply to, when ``rope_parameters`` is given per layer
        type and ``layer_types`` names them (the ``full_attention`` layers); ``None``: every layer.
    partial_rotary_factor : float or None
        ``partial_rotary_factor`` as set (``rope_dim`` is ``head_dim`` times it).
    architectures : tuple of str
        ``architectures`` as given (the class names engines such as exllamav3 dispatch on).
    rope_source : str
        Where the RoPE keys were read: ``"rope_parameters"``, ``"rope_scaling"``,
        ``"rope_parameters.full_attention"`` (given per layer type), or ``""`` (none).
    wrapper : str
        The top-level ``model_type`` of a wrapped model whose ``text_config`` was read (``"mistral3"``);
        ``""`` when the config is not wrapped.
    """

    source: str
    format: str
    model_type: str
    head_dim: int
    rope_dim: int
    n_layers: int | None
    base_scale: float
    base_key: str
    train_length: int | None
    train_length_key: str
    max_position_embeddings: int | None
    hidden_size: int | None
    num_attention_heads: int | None
    rope: RopeScaling
    temperatures: tuple = ()
    set_keys: tuple = ()
    unknown_keys: tuple = ()
    dynamic_ntk: bool = False
    rope_layers: tuple | None = None
    partial_rotary_factor: float | None = None
    architectures: tuple = ()
    rope_source: str = ""
    wrapper: str = ""

    @property
    def rope_per_layer_type(self) -> bool:
        """Whether the RoPE keys were given per layer type (``rope_parameters[layer_type]``)."""
        return self.rope_source.endswith(".full_attention")

    @property
    def rope_variant(self) -> str | None:
        """The toolkit's RoPE variant (``advise``'s ``rope``) of these frequencies; ``None`` if it has none.

        ``rope_type`` ``default``/``linear``/``dynamic``/``yarn`` are ``none``/``pi``/``dynamic_ntk``/
        ``yarn``; Qwen (v1)'s ``use_dynamic_ntk`` is ``dynamic_ntk``; ``llama3``, ``longrope`` and the
        rest have no counterpart.
        """
        if self.rope.rope_type == "default" and self.dynamic_ntk:
            return "dynamic_ntk"
        return ROPE_VARIANTS.get(self.rope.rope_type)

    @property
    def covered_length(self) -> int | None:
        """The length the model's recipe covers: where its authors say it runs as trained.

        One rule for every family: with YaRN, ``factor x original_max_position_embeddings`` (Qwen3:
        4 x 32768 = 131072, whatever ``max_position_embeddings`` says); with any other RoPE scaling
        (``llama3``, ``longrope``, ``linear``, ``dynamic``) the extended ``max_position_embeddings``
        (Llama 3.1: 131072; Gemma 3: 131072); without RoPE scaling ``max_position_embeddings``.  Where
        the key the rule reads is absent, the other one, then :attr:`train_length`.
        :attr:`covered_length_key` names what was read.
        """
        return self._covered()[0]

    @property
    def covered_length_key(self) -> str:
        """What :attr:`covered_length` was read from (``"factor x original_max_position_embeddings"``, ...)."""
        return self._covered()[1]

    def _covered(self) -> tuple:
        r = self.rope
        product = None
        if r.factor is not None and r.original_max_position_embeddings is not None:
            product = (int(round(r.factor * r.original_max_position_embeddings)),
                       "factor x original_max_position_embeddings")
        extended = (self.max_position_embeddings, "max_position_embeddings") if self.max_position_embeddings else None
        order = (product, extended) if r.rope_type == "yarn" else (extended, product)
        for found in order:
            if found is not None:
                return found
        return self.train_length, self.train_length_key

    @property
    def is_mla(self) -> bool:
        """Whether RoPE rotates only part of ``q.k`` (MLA's rope dimensions, or a ``partial_rotary_factor`` below 1)."""
        return self.rope_dim != self.head_dim

    @property
    def has_mla_head(self) -> bool:
        """Whether ``q.k`` is MLA's (``qk_nope_head_dim`` + ``qk_rope_head_dim``), not a partly rotated head."""
        prf = self.partial_rotary_factor
        return self.is_mla and (prf is None or self.rope_dim != int(self.head_dim * prf))



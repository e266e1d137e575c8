"""The scale a model actually runs with: a config read, and the multiplier each inference engine puts on q.k.

:func:`read_config` reads a Hugging Face ``config.json`` or a GGUF file into a
:class:`ModelScaling`; :func:`engine_scales` gives, for transformers, vLLM, llama.cpp, SGLang,
exllamav3, mlx-lm, TensorRT-LLM, onnxruntime-genai, Ollama and the model authors' reference, the multiplier
on ``q.k`` at each position, at the engine versions asked (:func:`parse_engine_pins`) or their
newest known rules.  One module per engine (:mod:`.transformers`, :mod:`.vllm`, :mod:`.llama_cpp`,
:mod:`.sglang`, :mod:`.exllamav3`, :mod:`.mlx_lm`, :mod:`.tensorrt_llm`, :mod:`.onnxruntime_genai`,
:mod:`.ollama`, :mod:`.reference`), each with a table ``RULES`` of its rules, the versions each holds for and where
each was read; the formulas are the scheme registry's.  :mod:`.cost` gives the i.i.d. theory's
price of a factor on ``q.k`` and the measured one; :func:`engine_setting` how to set the factor in each engine.
"""

from ._rules import NEWEST, EngineScale, Rule
from ._types import ROPE_VARIANTS
from .config import ModelScaling, RopeScaling, TemperatureRule, read_config
from .settings import Setting, engine_setting
from .table import ENGINES, EngineTable, engine_rules, engine_scales, parse_engine_pins, rules_markdown

__all__ = ["ENGINES", "NEWEST", "ROPE_VARIANTS", "EngineScale", "EngineTable", "ModelScaling", "RopeScaling", "Rule", "Setting",
           "TemperatureRule", "engine_rules", "engine_scales", "engine_setting", "parse_engine_pins", "read_config",
           "rules_markdown"]

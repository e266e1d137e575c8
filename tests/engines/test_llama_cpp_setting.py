"""The llama.cpp setting of ``engine_setting`` run in llama.cpp (llama-cpp-python) on the shipped SmolLM2 GGUF.

``engine_setting`` tells a llama.cpp user to override the GGUF key ``<arch>.rope.scaling.attn_factor``
with ``A = sqrt(M)`` for a factor ``M`` on ``q.k``: llama.cpp reads the key for every architecture
and multiplies its context's YaRN attention factor by it after the YaRN factor is set, and ggml's
RoPE multiplies cos and sin by that factor, so ``q.k`` is multiplied by ``A^2`` on every rotated
dimension (all of SmolLM2's) at every position.  Checked here as ``test_llama_cpp_run.py`` checks the
YaRN rule: llama.cpp with the override against the numpy decoder at ``M``, within the tolerance
measured with no scaling, and far from the decoder at 1; under YaRN (where ``--yarn-attn-factor`` is
overwritten) the override that the engines table prints for a config with ``attention_factor`` 1
gives llama.cpp the reference's ``1/sqrt(d)``.

``llama_cpp`` is imported plainly (no skip): ``make test-slow`` installs it.
"""

import math
import re

import numpy as np
import pytest
from helpers import mean_kl

import softmax_scale as ss
from softmax_scale.engines import engine_setting

from . import test_llama_cpp_run as run

#: The fixtures of test_llama_cpp_run: the numpy decoder, the prompt's ids, the engines table under YaRN.
decoder, ids, table = run.decoder, run.ids, run.table
CLEARLY, TOL = run.CLEARLY, run.TOL

#: A factor on q.k to ask for: YaRN 4's squared mscale.
M = 1.2965


def override(setting):
    """``{key: value}`` of the ``--override-kv KEY=float:VALUE`` a setting prints."""
    found = re.match(r"--override-kv (\S+)=float:(\S+?);", setting.text)
    assert found, setting.text
    return {found.group(1): float(found.group(2))}


@pytest.fixture(scope="module")
def smollm2():
    return ss.read_config(run.gguf_path())


@pytest.mark.slow
def test_the_override_multiplies_q_k_by_its_square(decoder, ids, smollm2):
    s = engine_setting("llama.cpp", smollm2, M / math.sqrt(smollm2.head_dim), n=np.arange(1, len(ids) + 1))
    kv = override(s)
    assert s.exact and kv == {"llama.rope.scaling.attn_factor": pytest.approx(math.sqrt(M), rel=1e-6)}
    logits = run.run_llama_cpp(ids, kv_overrides=kv)
    kl = mean_kl(logits, run.decoder_logits(decoder, ids, M))
    assert kl < TOL, kl
    assert mean_kl(logits, run.decoder_logits(decoder, ids, 1.0)) > CLEARLY * TOL  # negative control: it changed


@pytest.mark.slow
def test_under_yarn_the_printed_override_gives_the_reference(decoder, ids, table):
    """The table's YaRN config with `attention_factor` 1: llama.cpp applies (1 + 0.1 ln s)^2; the override
    it prints brings it back to the reference's 1, where `yarn_attn_factor` would have been overwritten."""
    s = table.setting("llama.cpp")
    kv = override(s)
    assert s.exact and list(kv.values()) == [pytest.approx(1 / (1 + 0.1 * math.log(4.0)), rel=1e-6)]
    fixed = run.run_llama_cpp(ids, kv_overrides=kv, **run.yarn_settings())
    kl = mean_kl(fixed, run.decoder_logits(decoder, ids, 1.0, run.ggml_frequencies(decoder)))
    assert kl < TOL, kl
    claim = table.engines["llama.cpp"].scale * math.sqrt(table.model.head_dim)
    assert mean_kl(fixed, run.decoder_logits(decoder, ids, claim, run.ggml_frequencies(decoder))) > CLEARLY * TOL

"""Engine rules by version: each before/after golden computed here from its formula (math.log), never from the package."""

import math

import numpy as np
import pytest
from packaging.version import Version

from softmax_scale.engines import ENGINES, engine_scales, parse_engine_pins

from .configs import LAGUNA, MINISTRAL3, MISTRAL_LARGE3, QWEN3_STATIC_YARN, YARN_MSCALE_PAIR


def get_mscale(s, m=1.0):
    """YaRN's magnitude factor on cos/sin, 0.1 m ln s + 1 (1 for s <= 1)."""
    return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0


def rel(table, engine):
    return table.engines[engine].scale * math.sqrt(table.model.head_dim)


def test_qwen3_static_yarn_in_transformers_4_51_takes_s_from_the_lengths():
    old = engine_scales(QWEN3_STATIC_YARN, [1, 65536], versions={"transformers": "4.51.0"})
    new = engine_scales(QWEN3_STATIC_YARN, [1, 65536])
    want_old, want_new = get_mscale(40960 / 32768) ** 2, get_mscale(4.0) ** 2
    np.testing.assert_allclose(rel(old, "transformers"), want_old, rtol=1e-12)
    np.testing.assert_allclose(rel(new, "transformers"), want_new, rtol=1e-12)
    assert round(want_old, 4) == 1.0451
    assert round(want_new, 4) == 1.2965
    assert old.engines["transformers"].version == "4.51.0"
    assert new.engines["transformers"].version == "newest"
    assert old.disagreements("transformers")
    assert not new.disagreements("transformers")


def test_a_transformers_version_no_row_covers_is_unknown_not_a_guess():
    t = engine_scales(QWEN3_STATIC_YARN, [1], versions={"transformers": "4.50.0"})
    e = t.engines["transformers"]
    assert e.scale is None
    assert e.version == "4.50.0"
    assert e.notes[0].startswith("unknown at transformers==4.50.0")


def test_ministral3_in_vllm_before_and_after_56446():
    n = np.array([1, 16384, 16385, 65537])  # p = n - 1: 0, 16383, 16384, 65536
    before = engine_scales(MINISTRAL3, n, versions={"vllm": "0.29.0"}).engines["vllm"]
    after = engine_scales(MINISTRAL3, n, versions={"vllm": "0.29.1"}).engines["vllm"]
    np.testing.assert_allclose(before.scale * math.sqrt(128), get_mscale(16) ** 2, rtol=1e-12)  # no beta either
    assert round(get_mscale(16) ** 2, 4) == 1.6314
    assert "ignores `mscale` and `mscale_all_dim`" in before.notes
    np.testing.assert_allclose(after.scale[:2] * math.sqrt(128), 1.0, rtol=1e-12)  # the ratio, beta still 1
    assert np.isnan(after.scale[2:]).all()  # whether it applies the beta after the PR was not read
    assert any("llama_4_scaling_beta" in note for note in after.notes)


@pytest.mark.parametrize("engine", ["transformers", "reference", "mlx-lm", "exllamav3"])
def test_ministral3_beta_temperature_at_16384_and_65536(engine):
    p = np.array([0, 16383, 16384, 65536])
    t = engine_scales(MINISTRAL3, p + 1)
    want = np.array([1.0, 1.0, 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(5)])
    np.testing.assert_allclose(rel(t, engine), want, rtol=1e-12)  # every static factor is 1 here
    assert t.engines[engine].layers is None  # every layer


@pytest.mark.parametrize("engine", ["llama.cpp", "tensorrt-llm"])
def test_ministral3_beta_is_unknown_where_its_handling_was_not_read(engine):
    t = engine_scales(MINISTRAL3, [16384, 16385])
    e = t.engines[engine]
    assert not np.isnan(e.scale[0])
    assert np.isnan(e.scale[1])


@pytest.mark.parametrize("version, want", [("0.0.43", get_mscale(16) ** 2), ("1.0.0", 1.0), ("1.2.1", 1.0),
                                           ("1.3.0", get_mscale(16) ** 2), (None, get_mscale(16) ** 2)])
def test_exllamav3_before_and_after_78b319e_and_its_fix(version, want):
    """mscale == mscale_all_dim == 1: the ratio collapses to 1 from 78b319e (v1.0.0) until 65e724c (v1.3.0)."""
    t = engine_scales(YARN_MSCALE_PAIR, [1, 4096], versions={} if version is None else {"exllamav3": version})
    np.testing.assert_allclose(rel(t, "exllamav3"), want, rtol=1e-12)


def test_exllamav3_from_1_3_sets_the_yarn_factor_to_one_under_the_beta():
    t = engine_scales(MINISTRAL3, [1], versions={"exllamav3": "1.3.0"})
    e = t.engines["exllamav3"]
    np.testing.assert_allclose(e.scale * math.sqrt(128), 1.0, rtol=1e-12)
    assert "sets the YaRN factor to 1 under `llama_4_scaling_beta`" in e.notes


def test_mistral_large3_in_vllm_is_unknown_before_56446():
    t = engine_scales(MISTRAL_LARGE3, [1, 8193], versions={"vllm": "0.29.0"})
    e = t.engines["vllm"]
    assert e.scale is None
    assert "#56446" in e.notes[1]
    assert "#57563" in e.notes[1]


@pytest.mark.parametrize("version", ["0.30.0", "0.31.0", None])
def test_vllm_deepseek_llama_scaling_from_0_30_is_the_rope_ratio_without_the_softmax_term(version):
    """From 0.30.0 deepseek_llama_scaling builds the same rope class as deepseek_yarn (mscale 1 / mscale_all_dim 0:
    get_mscale(36) = 1.3584 on cos/sin) and skips the softmax term: x1.8451 on the rope dimensions, x1 on the rest.
    0.30.0 takes that path on `apply_yarn_scaling: false`, 0.31.0 (PR #57563) on `attention_factor: 1.0`."""
    af = {**MISTRAL_LARGE3, "rope_parameters": {**MISTRAL_LARGE3["rope_parameters"], "attention_factor": 1.0}}
    for cfg in (MISTRAL_LARGE3, af):
        e = engine_scales(cfg, [1], versions={} if version is None else {"vllm": version}).engines["vllm"]
        np.testing.assert_allclose(e.scale * math.sqrt(192), get_mscale(36) ** 2, rtol=1e-12)
        np.testing.assert_allclose(e.nope_scale * math.sqrt(192), 1.0, rtol=1e-12)
    assert engine_scales(af, [1], versions={"vllm": "0.30.0"}).engines["vllm"].rules[1] == "deepseek_softmax"
    assert engine_scales(MISTRAL_LARGE3, [1], versions={"vllm": "0.31.0"}).engines["vllm"].rules[1] == \
        "deepseek_attention_factor"


def test_mistral_large3_hf_keys_in_newest_vllm_take_deepseek_yarn():
    """After #57563 only `attention_factor: 1.0` selects deepseek_llama_scaling: these HF keys (no attention_factor)
    get deepseek_yarn, get_mscale(36) = 1.3584 on cos/sin of the rope dimensions, mscale_all_dim unset (factor 1)."""
    t = engine_scales(MISTRAL_LARGE3, [1, 8192, 8193])
    e = t.engines["vllm"]
    np.testing.assert_allclose(e.scale[:2] * math.sqrt(192), get_mscale(36) ** 2, rtol=1e-12)
    np.testing.assert_allclose(e.nope_scale[:2] * math.sqrt(192), 1.0, rtol=1e-12)
    assert round(get_mscale(36) ** 2, 4) == 1.8451
    assert np.isnan(e.scale[2])  # the beta in rope_parameters: its handling after #56446 was not read
    assert "deepseek_attention_factor" in e.rules



def test_mistral_large3_reference_is_the_beta_alone_on_one_over_sqrt_192():
    t = engine_scales(MISTRAL_LARGE3, [1, 8192, 8193, 16385])
    want = np.array([1.0, 1.0, 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(3)]) / math.sqrt(192)
    np.testing.assert_allclose(t.engines["reference"].scale, want, rtol=1e-12)


def test_laguna_vllm_puts_1_4159_on_cos_sin_of_the_rotated_half_of_the_full_layers():
    t = engine_scales(LAGUNA, [1, 100000], versions={"vllm": "0.29.0"})
    e = t.engines["vllm"]
    full = tuple(i for i in range(40) if (i + 1) % 4 == 0)
    assert t.model.rope_dim == 64
    assert t.model.rope_layers == full
    assert round(get_mscale(64), 4) == 1.4159
    assert e.layers == full
    np.testing.assert_allclose(e.scale * math.sqrt(128), get_mscale(64) ** 2, rtol=1e-12)  # rotated half
    np.testing.assert_allclose(e.nope_scale * math.sqrt(128), 1.0, rtol=1e-12)  # the half not rotated
    np.testing.assert_allclose(e.other_scale * math.sqrt(128), 1.0, rtol=1e-12)  # sliding layers
    ref = t.engines["reference"]
    np.testing.assert_allclose(ref.scale * math.sqrt(128), 1.0, rtol=1e-12)
    assert t.disagreements("vllm")


def test_laguna_newest_vllm_honours_attention_factor_and_agrees_with_the_reference():
    t = engine_scales(LAGUNA, [1, 100000])
    e = t.engines["vllm"]
    assert e.version == "newest"
    np.testing.assert_allclose(e.scale * math.sqrt(128), 1.0 ** 2, rtol=1e-12)  # attention_factor 1.0, squared
    assert not t.disagreements("vllm")


@pytest.mark.parametrize("keys, want", [
    ({"attention_factor": 0.5}, 0.5 ** 2),  # attention_factor wins over everything
    ({"attention_factor": 1.25, "mscale": 1.0, "mscale_all_dim": 0.5}, 1.25 ** 2),
    ({"mscale": 1.0, "mscale_all_dim": 0.5}, (get_mscale(4, 1.0) / get_mscale(4, 0.5)) ** 2),
    ({"mscale": 1.0, "mscale_all_dim": 0.0}, get_mscale(4) ** 2),  # one of them zero: YaRN's own factor
    ({"attn_factor": 0.5}, get_mscale(4) ** 2),  # no longer forwarded
    ({"apply_yarn_scaling": False}, get_mscale(4) ** 2),
])
def test_vllm_after_56446_reads_yarn_as_transformers_does(keys, want):
    cfg = {"model_type": "llama", "head_dim": 128, "max_position_embeddings": 4 * 32768,
           "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, **keys}}
    after = engine_scales(cfg, [1], versions={"vllm": "0.29.1"}).engines["vllm"]
    np.testing.assert_allclose(after.scale * math.sqrt(128), want, rtol=1e-12)
    for k in ("attn_factor", "apply_yarn_scaling"):
        assert (f"drops `{k}`" in after.notes) == (k in keys)
    before = engine_scales(cfg, [1], versions={"vllm": "0.29.0"}).engines["vllm"]
    assert before.scale is not None and before.version == "0.29.0"


def test_every_family_has_disjoint_ranges():
    probes = [Version(v) for v in ("0.0.1", "0.0.43", "0.11.0", "0.29.0", "0.29.1rc0", "0.29.1", "1.0.0", "1.2.1",
                                   "1.3.0", "1.4.1", "4.50.0", "4.51.0", "4.52.4", "4.53.0", "4.56.0", "9.0.0")]
    for name, mod in ENGINES.items():
        families = {}
        for r in mod.RULES.values():
            families.setdefault(r.family or r.name, []).append(r)
        for family, rows in families.items():
            for v in [*probes, None]:
                assert sum(r.holds_at(v) for r in rows) <= 1, (name, family, v)


def test_pins_are_read_as_pip_spells_them():
    pins = parse_engine_pins(["vllm==0.11.0", "Transformers==4.51.0", "llama-cpp==6000", "mlx_lm==0.31.3"])
    assert pins == {"vllm": Version("0.11.0"), "transformers": Version("4.51.0"), "llama.cpp": Version("6000"),
                    "mlx-lm": Version("0.31.3")}


@pytest.mark.parametrize("specs, msg", [(["vllm"], "NAME==VERSION"), (["vllm>=0.1"], "NAME==VERSION"),
                                        (["vllm==0.*"], "NAME==VERSION"), (["foo==1"], "must name one of"),
                                        (["reference==1"], "must name one of"),
                                        (["vllm==1", "vllm==2"], "pinned twice")])
def test_bad_pins_raise_naming_engine(specs, msg):
    with pytest.raises(ValueError, match="`engine`") as exc:
        parse_engine_pins(specs)
    assert msg in str(exc.value)


def test_engine_scales_refuses_an_unknown_engine_or_version():
    with pytest.raises(ValueError, match="`versions`"):
        engine_scales(QWEN3_STATIC_YARN, [1], versions={"lmdeploy": "1"})
    with pytest.raises(ValueError, match="`versions` must be a PEP 440 version"):
        engine_scales(QWEN3_STATIC_YARN, [1], versions={"vllm": "latest"})


@pytest.mark.parametrize("version, want", [("0.13.2", get_mscale(16) ** 2), ("0.14.0", 1.0), (None, 1.0)])
def test_onnxruntime_genai_before_and_after_2076(version, want):
    """Ministral 3's explicit mscale = 1: ignored before PR #2076 (v0.14.0), the cos/sin factor after."""
    t = engine_scales(MINISTRAL3, [1], versions={} if version is None else {"onnxruntime-genai": version})
    np.testing.assert_allclose(rel(t, "onnxruntime-genai"), want, rtol=1e-12)


def test_onnxruntime_genai_builds_yarn_only_with_beta_fast():
    t = engine_scales(QWEN3_STATIC_YARN, [1])
    np.testing.assert_allclose(rel(t, "onnxruntime-genai"), 1.0, rtol=1e-12)
    assert "no `beta_fast`" in t.engines["onnxruntime-genai"].notes[0]
    cfg = {**QWEN3_STATIC_YARN, "rope_scaling": {**QWEN3_STATIC_YARN["rope_scaling"], "beta_fast": 32.0}}
    np.testing.assert_allclose(rel(engine_scales(cfg, [1]), "onnxruntime-genai"), get_mscale(4) ** 2, rtol=1e-12)


def test_a_row_known_only_in_part_is_marked_and_lists_its_unknown_positions():
    t = engine_scales(MINISTRAL3, [1, 16385], versions={"vllm": "0.29.1"})
    assert not t.disagreements("vllm")
    row = next(line for line in t.to_text().splitlines() if line.startswith("vllm"))
    assert row.startswith("vllm?")
    assert t.to_json()["engines"]["vllm"]["unknown_n"] == [16385]


@pytest.mark.parametrize("version, want", [("4.51.0", get_mscale(40960 / 32768) ** 2),
                                           ("4.55.0", get_mscale(40960 / 32768) ** 2),
                                           ("4.56.0", get_mscale(4.0) ** 2), ("4.57.0", get_mscale(4.0) ** 2),
                                           ("5.0.0", get_mscale(4.0) ** 2), ("5.25.0", get_mscale(4.0) ** 2)])
def test_qwen3_8b_in_transformers_by_release(version, want):
    """PR #40320 (first in 4.56.0) took s from `factor`; before it from the lengths (40,960 / 32,768)."""
    from .configs import QWEN3_8B

    t = engine_scales(QWEN3_8B, [1], versions={"transformers": version})
    np.testing.assert_allclose(rel(t, "transformers"), want, rtol=1e-12)


def test_transformers_4_53_to_4_55_take_the_mscale_ratio_on_s_from_the_lengths():
    t = engine_scales(YARN_MSCALE_PAIR, [1], versions={"transformers": "4.55.0"})
    np.testing.assert_allclose(rel(t, "transformers"), 1.0, rtol=1e-12)  # mscale = mscale_all_dim
    old = engine_scales(YARN_MSCALE_PAIR, [1], versions={"transformers": "4.52.0"})
    assert old.engines["transformers"].scale is None  # the 4.51 row's handling of mscale was not read


def test_llama_cpp_build_tags_are_read():
    pins = parse_engine_pins(["llama.cpp==b6000"])
    assert pins == {"llama.cpp": Version("6000")}
    assert parse_engine_pins(["llama-cpp==6000"]) == pins
    with pytest.raises(ValueError, match="build such as b6000"):
        parse_engine_pins(["llama.cpp==1.0"])
    from .configs import GEMMA3

    t = engine_scales(GEMMA3, [1], versions={"llama.cpp": "b6000"})
    assert t.engines["llama.cpp"].version == "b6000"
    np.testing.assert_allclose(t.engines["llama.cpp"].scale, 1 / 16, rtol=1e-12)
    y = engine_scales(QWEN3_STATIC_YARN, [1], versions={"llama.cpp": "b6000"})
    np.testing.assert_allclose(rel(y, "llama.cpp"), get_mscale(4.0) ** 2, rtol=1e-12)  # ggml's own YaRN factor
    assert "yarn_attn_factor_pre17945" in y.engines["llama.cpp"].rules


#: DeepSeek-V3's attention with YaRN 40, mscale 1 and mscale_all_dim 0: the ratio on the rotated dimensions only.
_DS_MSCALE_ONLY = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
                   "num_hidden_layers": 61, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                   "kv_lora_rank": 512, "max_position_embeddings": 163840,
                   "rope_scaling": {"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 0.0,
                                    "original_max_position_embeddings": 4096}}


def _rope_nope(table):
    e, d = table.engines["llama.cpp"], math.sqrt(192)
    return float(e.scale[0] * d), float((e.scale if e.nope_scale is None else e.nope_scale)[0] * d)


@pytest.mark.parametrize("build, mscale_all_dim, want_rope, want_nope", [
    # before PR #17945 (b7371): kq_scale = (1 + 0.1 mscale_all_dim ln s)^2, ggml's 1 + 0.1 ln s on cos/sin uncancelled
    ("b7370", 0.0, get_mscale(40) ** 2, 1.0),
    ("b7370", 1.0, get_mscale(40) ** 4, get_mscale(40) ** 2),
    # from b7371: the context's factor get_mscale(s) (yarn_log_multiplier 0 counts as unset), attn_factor_org in kq
    ("b7371", 0.0, get_mscale(40) ** 4, get_mscale(40) ** 2),
    ("b7371", 1.0, get_mscale(40) ** 2, get_mscale(40) ** 2),
    (None, 1.0, get_mscale(40) ** 2, get_mscale(40) ** 2)])
def test_llama_cpp_deepseek2_kq_scale_before_and_after_pr_17945(build, mscale_all_dim, want_rope, want_nope):
    """Builds before b7371 give x1 on the nope and x1.8739 on the rope dimensions for mscale 1 / mscale_all_dim 0."""
    cfg = {**_DS_MSCALE_ONLY, "rope_scaling": {**_DS_MSCALE_ONLY["rope_scaling"], "mscale_all_dim": mscale_all_dim}}
    t = engine_scales(cfg, [1], versions=None if build is None else {"llama.cpp": build})
    np.testing.assert_allclose(_rope_nope(t), [want_rope, want_nope], rtol=1e-12)
    rule = "deepseek2_kq_scale_pre17945" if build == "b7370" else "deepseek2_kq_scale"
    assert rule in t.engines["llama.cpp"].rules
    if build == "b7370" and mscale_all_dim == 0.0:
        assert round(want_rope, 4) == 1.8739 and want_nope == 1.0


def test_llama_cpp_mistral3_graph_cancels_ggml_factor_before_pr_17945():
    """llm_build_mistral3 passed attn_factor = 1/(1 + 0.1 ln s) to the rope: x1 on q.k, with or without the pair."""
    t = engine_scales(YARN_MSCALE_PAIR | {"model_type": "ministral3"}, [1], versions={"llama.cpp": "b7000"})
    np.testing.assert_allclose(rel(t, "llama.cpp"), 1.0, rtol=1e-12)
    assert "mistral3_attn_factor_pre17945" in t.engines["llama.cpp"].rules
    no_pair = {**YARN_MSCALE_PAIR, "model_type": "ministral3", "rope_parameters": {
        k: v for k, v in YARN_MSCALE_PAIR["rope_parameters"].items() if k not in ("mscale", "mscale_all_dim")}}
    np.testing.assert_allclose(rel(engine_scales(no_pair, [1], versions={"llama.cpp": "b7000"}), "llama.cpp"), 1.0,
                               rtol=1e-12)
    np.testing.assert_allclose(rel(engine_scales(no_pair, [1]), "llama.cpp"), get_mscale(16) ** 2, rtol=1e-12)


def test_llama_cpp_attention_factor_before_pr_17945_is_unknown():
    cfg = {**QWEN3_STATIC_YARN, "rope_scaling": {**QWEN3_STATIC_YARN["rope_scaling"], "attention_factor": 1.0}}
    assert engine_scales(cfg, [1], versions={"llama.cpp": "b7370"}).engines["llama.cpp"].scale is None
    np.testing.assert_allclose(rel(engine_scales(cfg, [1], versions={"llama.cpp": "b7371"}), "llama.cpp"),
                               get_mscale(4.0) ** 2, rtol=1e-12)  # overwritten from b7371


def test_vllm_deepseek_reads_a_top_level_llama_4_scaling():
    """DeepseekV2Model: q x (1 + beta ln(1 + floor(p / L))) from a top-level `llama_4_scaling`."""
    from .configs import DEEPSEEK_V3

    cfg = {**DEEPSEEK_V3, "llama_4_scaling": {"beta": 0.1, "original_max_position_embeddings": 8192}}
    n = np.array([1, 8192, 8193, 16385])
    e = engine_scales(cfg, n).engines["vllm"]
    want = (1 + 0.1 * math.log(40)) ** 2 * (1 + 0.1 * np.log1p(np.floor((n - 1) / 8192)))
    np.testing.assert_allclose(e.scale * math.sqrt(192), want, rtol=1e-12)
    assert "deepseek_llama_4_scaling" in e.rules


def test_ollama_own_engine_before_0_30_and_llama_server_from_it():
    """Ollama's own mistral3 model (PR #13432, v0.13.3 to 0.29): the mscale pair cancels ggml's factor (x1) and the
    beta scales q: 1 + 0.1 ln 2 at 32,768 keys; from v0.30.0 (PR #16031) llama-server: llama.cpp's row."""
    from .configs import MINISTRAL3_WRAPPED

    n = np.array([1, 16384, 32768])
    own = engine_scales(MINISTRAL3_WRAPPED, n, versions={"ollama": "0.20.0"})
    np.testing.assert_allclose(rel(own, "ollama"), [1.0, 1.0, 1 + 0.1 * math.log(2)], rtol=1e-12)
    no_pair = {**MINISTRAL3_WRAPPED, "text_config": {**MINISTRAL3_WRAPPED["text_config"], "rope_parameters": {
        k: v for k, v in MINISTRAL3["rope_parameters"].items() if k not in ("mscale", "mscale_all_dim")}}}
    np.testing.assert_allclose(rel(engine_scales(no_pair, [1], versions={"ollama": "0.20.0"}), "ollama"),
                               get_mscale(16) ** 2, rtol=1e-12)
    new = engine_scales(MINISTRAL3_WRAPPED, n)
    np.testing.assert_array_equal(new.engines["ollama"].scale, new.engines["llama.cpp"].scale)
    assert new.engines["ollama"].rules[0] == "llama_server"
    assert engine_scales(MINISTRAL3_WRAPPED, n, versions={"ollama": "0.13.1"}).engines["ollama"].scale is None
    assert parse_engine_pins(["ollama==0.29.0"]) == {"ollama": Version("0.29.0")}


@pytest.mark.parametrize("version, want", [("0.5.13", get_mscale(16) ** 2), ("0.5.15", get_mscale(16) ** 2),
                                           ("0.5.16", 1.0), (None, 1.0)])
def test_sglang_takes_the_mscale_ratio_from_0_5_16(version, want):
    """PR #31232, first in 0.5.16: Ministral 3's mscale = mscale_all_dim = 1 gives the ratio 1."""
    t = engine_scales(YARN_MSCALE_PAIR, [1], versions={} if version is None else {"sglang": version})
    np.testing.assert_allclose(rel(t, "sglang"), want, rtol=1e-12)


@pytest.mark.parametrize("version, yarn", [(None, 1.0), ("0.5.16", 1.0), ("0.5.15", get_mscale(16) ** 2)])
def test_sglang_ministral3_scales_q_by_llama_4_beta(version, yarn):
    """Ministral3Attention (0.5.6.post1 on): q x (1 + 0.1 ln(1 + floor(p / 16384))), p = n - 1, on every layer."""
    from .configs import MINISTRAL3_WRAPPED

    n = np.array([1, 16384, 16385, 32769, 131072])
    want = yarn * (1 + 0.1 * np.log1p(np.floor((n - 1) / 16384)))
    for cfg in (MINISTRAL3, MINISTRAL3_WRAPPED):
        t = engine_scales(cfg, n, versions={} if version is None else {"sglang": version})
        np.testing.assert_allclose(rel(t, "sglang"), want, rtol=1e-12)
        assert "ministral3_llama_4_scaling" in t.engines["sglang"].rules
    assert round(want[2] / yarn, 4) == 1.0693


def test_sglang_ministral3_divides_by_16384_whatever_the_rope_dict_says():
    cfg = {**MINISTRAL3, "rope_parameters": {**MINISTRAL3["rope_parameters"], "original_max_position_embeddings": 8192}}
    e = engine_scales(cfg, [8193, 16385]).engines["sglang"]
    np.testing.assert_allclose(e.scale * math.sqrt(128), [1.0, 1 + 0.1 * math.log(2)], rtol=1e-12)
    assert any("takes L = 16384" in x for x in e.notes)
    assert engine_scales(MINISTRAL3, [16385], versions={"sglang": "0.5.6"}).engines["sglang"].scale is None


def test_sglang_before_0_5_13_is_unknown_for_yarn():
    assert engine_scales(YARN_MSCALE_PAIR, [1], versions={"sglang": "0.5.12"}).engines["sglang"].scale is None


def test_sglang_keeps_the_base_softmax_scale_without_apply_yarn_scaling_and_reads_top_level_beta():
    """Mistral-Large-3 in HF keys: deepseek_yarn on the rope dimensions (get_mscale(36)^2), no softmax mscale
    (apply_yarn_scaling false, PR #26203), and a top-level llama_4_scaling on q: 1 + 0.1 ln(1 + floor(p / 8192))."""
    rope = {k: v for k, v in MISTRAL_LARGE3["rope_parameters"].items() if k != "llama_4_scaling_beta"}
    cfg = {**MISTRAL_LARGE3, "rope_parameters": rope,
           "llama_4_scaling": {"beta": 0.1, "original_max_position_embeddings": 8192}}
    n = np.array([1, 8192, 8193, 16385])
    e = engine_scales(cfg, n).engines["sglang"]
    beta = 1 + 0.1 * np.log1p(np.floor((n - 1) / 8192))
    np.testing.assert_allclose(e.scale * math.sqrt(192), get_mscale(36) ** 2 * beta, rtol=1e-12)
    np.testing.assert_allclose(e.nope_scale * math.sqrt(192), beta, rtol=1e-12)
    assert "deepseek_apply_yarn_scaling" in e.rules and "deepseek_llama_4_scaling" in e.rules

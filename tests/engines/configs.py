"""The synthetic configs of the golden tests, as a user's config.json would spell them."""

BASE = {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32}  # head dimension 128

YARN = {**BASE, "model_type": "qwen3", "max_position_embeddings": 131072,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
YARN_AF1 = {**YARN, "rope_scaling": {**YARN["rope_scaling"], "attention_factor": 1.0}}
DEEPSEEK_V3 = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128, "num_hidden_layers": 61,
               "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "kv_lora_rank": 512,
               "max_position_embeddings": 163840,
               "rope_scaling": {"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 32,
                                "beta_slow": 1, "original_max_position_embeddings": 4096}}
QWEN_V1 = {**BASE, "model_type": "qwen", "seq_length": 2048, "use_logn_attn": True, "use_dynamic_ntk": True}
LLAMA4 = {"model_type": "llama4", "architectures": ["Llama4ForConditionalGeneration"],
          "text_config": {"model_type": "llama4_text", "head_dim": 128, "hidden_size": 5120, "num_attention_heads": 40,
                          "num_hidden_layers": 48, "max_position_embeddings": 10485760, "attn_temperature_tuning": True,
                          "floor_scale": 8192, "attn_scale": 0.1, "no_rope_layers": []}}
GEMMA3 = {"model_type": "gemma3_text", "head_dim": 256, "hidden_size": 2560, "num_attention_heads": 8,
          "num_hidden_layers": 34, "query_pre_attn_scalar": 256}

# Configs of the version goldens, shaped as each model's config.json spells its scaling keys.
QWEN3_STATIC_YARN = {"model_type": "qwen3", "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
                     "num_hidden_layers": 36, "max_position_embeddings": 40960,
                     "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
MINISTRAL3 = {"model_type": "ministral3", "head_dim": 128, "hidden_size": 5120, "num_attention_heads": 32,
              "num_hidden_layers": 40, "max_position_embeddings": 262144,
              "rope_parameters": {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 16384,
                                  "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                  "llama_4_scaling_beta": 0.1, "rope_theta": 1e9}}
#: YaRN 16 with mscale = mscale_all_dim = 1 and no Llama 4 scaling: the shape whose factor exllamav3 collapsed to 1.
YARN_MSCALE_PAIR = {**MINISTRAL3, "model_type": "mistral", "rope_parameters": {
    k: v for k, v in MINISTRAL3["rope_parameters"].items() if k != "llama_4_scaling_beta"}}
#: Mistral-Large-3's params.json in HF keys: DeepSeek-V3 attention, YaRN 36 without its magnitude factor,
#: Llama 4 scaling beta 0.1 at 8192.
MISTRAL_LARGE3 = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
                  "num_hidden_layers": 61, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                  "kv_lora_rank": 512, "max_position_embeddings": 294912,
                  "rope_parameters": {"rope_type": "yarn", "factor": 36.0, "original_max_position_embeddings": 8192,
                                      "beta_fast": 32.0, "beta_slow": 1.0, "apply_yarn_scaling": False,
                                      "llama_4_scaling_beta": 0.1, "rope_theta": 1e6}}
#: Laguna-XS.2's shape: YaRN 64 with attention_factor 1, half the dimensions rotated, YaRN on the 10 full-attention
#: layers of 40 (every 4th), plain RoPE on the sliding ones.
LAGUNA = {"architectures": ["LagunaForCausalLM"], "model_type": "laguna", "head_dim": 128, "hidden_size": 2048, "num_attention_heads": 16,
          "num_hidden_layers": 40, "max_position_embeddings": 64 * 4096, "partial_rotary_factor": 0.5,
          "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(40)],
          "rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 64.0, "attention_factor": 1.0,
                                                 "original_max_position_embeddings": 4096, "rope_theta": 5e5},
                              "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}

# Real config shapes: each as its public config.json spells the keys the reader reads; keys that bear on
# nothing here (vocabulary, MoE sizes, quantization) are left out.
#: Ministral-3-14B-Instruct-2512: a Mistral3ForConditionalGeneration wrapper, the language model in text_config
#: (model_type ministral3), YaRN 16 with mscale = mscale_all_dim = 1 and llama_4_scaling_beta 0.1 at 16,384.
MINISTRAL3_WRAPPED = {"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3",
                      "image_token_index": 10, "multimodal_projector_bias": False, "projector_hidden_act": "gelu",
                      "spatial_merge_size": 2, "vision_feature_layer": -1,
                      "text_config": {**MINISTRAL3, "num_key_value_heads": 8, "rms_norm_eps": 1e-5,
                                      "sliding_window": None, "tie_word_embeddings": False},
                      "vision_config": {"model_type": "pixtral", "head_dim": 64, "hidden_size": 1024,
                                        "num_attention_heads": 16, "num_hidden_layers": 24, "patch_size": 14,
                                        "rope_theta": 10000.0}}
#: Kimi-K2-Instruct: model_type kimi_k2 on DeepSeek-V3's class, YaRN 32 with mscale = mscale_all_dim = 1.
KIMI_K2 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "hidden_size": 7168,
           "num_attention_heads": 64, "num_key_value_heads": 64, "num_hidden_layers": 61, "q_lora_rank": 1536,
           "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
           "max_position_embeddings": 131072, "rope_theta": 50000.0,
           "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                            "original_max_position_embeddings": 4096, "type": "yarn"}}
#: Phi-3-mini-128k-instruct: LongRoPE from 4,096 to 131,072 (the factor lists shortened: no rule here reads them).
PHI3_MINI_128K = {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 3072,
                  "num_attention_heads": 32, "num_key_value_heads": 32, "num_hidden_layers": 32,
                  "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                  "sliding_window": 262144,
                  "rope_scaling": {"type": "longrope", "long_factor": [1.08, 1.11, 1.14], "short_factor": [1.0, 1.0, 1.0]}}
#: Qwen3-8B with the YaRN its model card gives for 131,072 tokens.
QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128, "hidden_size": 4096,
            "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 36,
            "max_position_embeddings": 40960, "rope_theta": 1000000,
            "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
#: Laguna-XS.2 with its RoPE flattened into one `rope_scaling` (the transformers 4 spelling), layer_types kept.
LAGUNA_FLAT = {**{k: v for k, v in LAGUNA.items() if k != "rope_parameters"}, "architectures": ["LagunaForCausalLM"],
               "rope_scaling": dict(LAGUNA["rope_parameters"]["full_attention"])}
#: Gemma-3-27b-it: a Gemma3ForConditionalGeneration wrapper; query_pre_attn_scalar 168 = 5376 / 32, linear RoPE 8.
GEMMA3_27B = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
              "text_config": {"model_type": "gemma3_text", "head_dim": 128, "hidden_size": 5376,
                              "num_attention_heads": 32, "num_key_value_heads": 16, "num_hidden_layers": 62,
                              "query_pre_attn_scalar": 168, "max_position_embeddings": 131072,
                              "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "rope_theta": 1000000.0,
                              "rope_local_base_freq": 10000.0, "sliding_window": 1024},
              "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152, "num_attention_heads": 16,
                                "num_hidden_layers": 27}}

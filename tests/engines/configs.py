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
LAGUNA = {"model_type": "laguna", "head_dim": 128, "hidden_size": 2048, "num_attention_heads": 16,
          "num_hidden_layers": 40, "max_position_embeddings": 64 * 4096, "partial_rotary_factor": 0.5,
          "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(40)],
          "rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 64.0, "attention_factor": 1.0,
                                                 "original_max_position_embeddings": 4096, "rope_theta": 5e5},
                              "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}

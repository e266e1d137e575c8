"""The synthetic configs of the golden tests (issue 31, point 4), as a user's config.json would spell them."""

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

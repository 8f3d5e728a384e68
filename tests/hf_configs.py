"""Published Hugging Face ``config.json`` values (trimmed to what shapes the model) for the import tests."""

GEMMA3_1B = {
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "attention_bias": False, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "intermediate_size": 6912,
    "max_position_embeddings": 32768, "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
    "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000, "rope_theta": 1000000,
    "sliding_window": 512, "sliding_window_pattern": 6, "vocab_size": 262144,
}  # fmt: skip

GEMMA2_2B = {
    "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "attention_bias": False, "head_dim": 256,
    "hidden_act": "gelu_pytorch_tanh", "hidden_size": 2304, "intermediate_size": 9216, "num_attention_heads": 8,
    "num_hidden_layers": 26, "num_key_value_heads": 4, "query_pre_attn_scalar": 256, "sliding_window": 4096,
    "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0, "vocab_size": 256000,
}  # fmt: skip

DEEPSEEK_V2_LITE = {
    "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "attention_bias": False,
    "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 10944,
    "kv_lora_rank": 512, "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 64,
    "n_shared_experts": 2, "norm_topk_prob": False, "num_attention_heads": 16, "num_experts_per_tok": 6,
    "num_hidden_layers": 27, "num_key_value_heads": 16, "q_lora_rank": None, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06, "routed_scaling_factor": 1.0, "scoring_func": "softmax",
    "tie_word_embeddings": False, "topk_group": 1, "topk_method": "greedy", "v_head_dim": 128, "vocab_size": 102400,
}  # fmt: skip

DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "attention_bias": False,
    "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168, "intermediate_size": 18432,
    "kv_lora_rank": 512, "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256,
    "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 61, "num_key_value_heads": 128, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
    "tie_word_embeddings": False, "topk_group": 4, "topk_method": "noaux_tc", "v_head_dim": 128, "vocab_size": 129280,
}  # fmt: skip

_LFM2_TYPES = ["conv", "conv", "full_attention", "conv", "conv", "full_attention", "conv", "conv", "full_attention",
               "conv", "full_attention", "conv", "full_attention", "conv", "full_attention", "conv"]  # fmt: skip
LFM2_350M = {
    "architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2", "block_auto_adjust_ff_dim": True,
    "block_ffn_dim_multiplier": 1.0, "block_multiple_of": 256, "conv_L_cache": 3, "conv_bias": False,
    "hidden_size": 1024, "intermediate_size": 6656, "layer_types": _LFM2_TYPES, "norm_eps": 1e-05,
    "num_attention_heads": 16, "num_hidden_layers": 16, "num_key_value_heads": 8, "rope_theta": 1000000.0,
    "vocab_size": 65536,
}  # fmt: skip
LFM2_1_2B = {**LFM2_350M, "hidden_size": 2048, "intermediate_size": 12288, "num_attention_heads": 32}

_GRANITE_TYPES = ["attention" if i in (5, 15, 25, 35) else "mamba" for i in range(40)]
GRANITE_4_H_TINY = {
    "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid", "attention_bias": False,
    "hidden_size": 1536, "intermediate_size": 512, "shared_intermediate_size": 1024, "num_local_experts": 64,
    "num_experts_per_tok": 6, "num_attention_heads": 12, "num_key_value_heads": 4, "num_hidden_layers": 40,
    "layer_types": _GRANITE_TYPES, "mamba_n_heads": 48, "mamba_d_head": 64, "mamba_d_state": 128,
    "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_conv_bias": True, "mamba_proj_bias": False,
    "position_embedding_type": "nope", "tie_word_embeddings": True, "vocab_size": 100352,
}  # fmt: skip
GRANITE_4_H_MICRO = {**GRANITE_4_H_TINY, "hidden_size": 2048, "num_local_experts": 0, "shared_intermediate_size": 8192,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "mamba_n_heads": 64}  # fmt: skip

"""Real-world-style Triton kernels: one module per kernel, each with a small
`test_*` correctness harness and a production-size `bench_*` timing harness.

MODULES maps module file -> kernel name; the GPU scripts and tests iterate over it."""
from __future__ import annotations

MODULES: dict[str, str] = {
    "rope_inplace.py": "rotary_embedding_kernel",
    "kv_cache_scatter.py": "reshape_and_cache_kernel",
    "swiglu_autotune.py": "swiglu_fwd_kernel",
    "geglu_heuristics.py": "geglu_tanh_kernel",
    "layernorm_large.py": "layer_norm_fwd_kernel",
    "flash_attn_fwd.py": "attn_fwd_kernel",
    "softmax_out.py": "online_softmax_kernel",
    "quant_int8.py": "per_token_quant_int8_kernel",
    "gemv_fp16.py": "gemv_kernel",
    "fused_add_rmsnorm.py": "fused_add_rmsnorm_kernel",
    "sampler_logprobs.py": "temperature_log_softmax_kernel",
}

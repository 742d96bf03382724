"""Write new key/value tokens into a paged KV cache (vLLM `reshape_and_cache_flash`):
one program per token, the slot mapping gives (block, offset) in the cache; slot -1
marks a padding token. In place; slots are distinct (a permutation prefix)."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32


@triton.jit
def reshape_and_cache_kernel(key_ptr, value_ptr, key_cache_ptr, value_cache_ptr, slot_mapping_ptr,
                             stride_key_tok, stride_value_tok, stride_cache_block, stride_cache_slot,
                             block_size, n_elems, BLOCK: tl.constexpr):
    tok = tl.program_id(0)
    slot = tl.load(slot_mapping_ptr + tok)
    if slot < 0:
        return
    blk = slot // block_size
    off = slot % block_size
    dst = blk * stride_cache_block + off * stride_cache_slot
    for start in range(0, n_elems, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_elems
        k = tl.load(key_ptr + tok * stride_key_tok + offs, mask=mask)
        v = tl.load(value_ptr + tok * stride_value_tok + offs, mask=mask)
        tl.store(key_cache_ptr + dst + offs, k, mask=mask)
        tl.store(value_cache_ptr + dst + offs, v, mask=mask)


def reshape_and_cache(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                      value_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """key/value: (tokens, heads, head_size); caches: (blocks, block_size, heads, head_size)."""
    num_tokens = key.shape[0]
    n_elems = key.shape[1] * key.shape[2]
    reshape_and_cache_kernel[(num_tokens,)](
        key, value, key_cache, value_cache, slot_mapping,
        key.stride(0), value.stride(0), key_cache.stride(0), key_cache.stride(1),
        key_cache.shape[1], n_elems, BLOCK=128, num_warps=1)


def make_inputs(tokens: int, heads: int, head_size: int, blocks: int, block_size: int):
    key = torch.randn(tokens, heads, head_size, device=DEVICE, dtype=DTYPE)
    value = torch.randn(tokens, heads, head_size, device=DEVICE, dtype=DTYPE)
    key_cache = torch.randn(blocks, block_size, heads, head_size, device=DEVICE, dtype=DTYPE)
    value_cache = torch.randn(blocks, block_size, heads, head_size, device=DEVICE, dtype=DTYPE)
    # distinct slots (no write races); the last token is padding
    slots = torch.randperm(blocks * block_size, device=DEVICE)[:tokens]
    slots[-1] = -1
    return key, value, key_cache, value_cache, slots


def test_reshape_and_cache():
    key, value, kc, vc, slots = make_inputs(11, 3, 24, 5, 4)
    ref_k, ref_v = kc.clone(), vc.clone()
    live = slots >= 0
    ref_k.view(-1, 3, 24)[slots[live]] = key[live]
    ref_v.view(-1, 3, 24)[slots[live]] = value[live]
    reshape_and_cache(key, value, kc, vc, slots)
    assert torch.equal(kc, ref_k) and torch.equal(vc, ref_v)


def bench_reshape_and_cache():
    # 8k new tokens, 8 kv heads x 128, a 64k-slot cache (16-token blocks)
    shape = (8192, 8, 128, 4096, 16) if DEVICE == "cuda" else (13, 2, 16, 6, 4)
    reshape_and_cache(*make_inputs(*shape))

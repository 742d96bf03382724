"""index_add / scatter-add of fp32 rows with atomics: out[index[i], :] += src[i, :].
One program per (source row, block of 128 columns).

The harness uses integer-valued sources so the sums are exact whatever order the
atomics land in: the output is then deterministic, as a correctness check needs."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def scatter_add_kernel(src_ptr, index_ptr, out_ptr, dim, src_stride, out_stride, BLOCK_D: tl.constexpr):
    i = tl.program_id(0)
    col_block = tl.program_id(1)
    cols = col_block * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < dim
    dst = tl.load(index_ptr + i)
    vals = tl.load(src_ptr + i * src_stride + cols, mask=mask, other=0.0)
    tl.atomic_add(out_ptr + dst * out_stride + cols, vals, mask=mask)


def index_add(out: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    n_src, dim = src.shape
    grid = lambda meta: (n_src, triton.cdiv(dim, meta["BLOCK_D"]))
    scatter_add_kernel[grid](src, index, out, dim, src.stride(0), out.stride(0), BLOCK_D=128)
    return out


def make_inputs():
    # 65536 source rows x 1024 fp32 (268 MB) into 4096 destination rows.
    n_src, n_dst, dim = (65536, 4096, 1024) if DEVICE == "cuda" else (20, 6, 200)
    src = torch.randint(-8, 9, (n_src, dim), device=DEVICE).to(torch.float32)
    index = torch.randint(0, n_dst, (n_src,), device=DEVICE, dtype=torch.int64)
    out = torch.zeros(n_dst, dim, device=DEVICE, dtype=torch.float32)
    return out, index, src


def harness_scatter_add():
    out, index, src = make_inputs()
    return index_add(out, index, src)


def reference_scatter_add():
    out, index, src = make_inputs()
    return out.index_add_(0, index, src)

"""LayerNorm forward on fp32 with weight and bias: one program per row, three
passes over the row in blocks of 256 (mean, variance, normalize)."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def layernorm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, row_stride, n_cols, eps,
                     BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_ptr += row * row_stride
    y_ptr += row * row_stride
    # mean
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in tl.range(0, n_cols, BLOCK_SIZE, num_stages=4):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(x_ptr + cols, mask=cols < n_cols, other=0.0)
        _mean += a
    mean = tl.sum(_mean, axis=0) / n_cols
    # variance
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in tl.range(0, n_cols, BLOCK_SIZE, num_stages=4):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(x_ptr + cols, mask=cols < n_cols, other=0.0)
        a = tl.where(cols < n_cols, a - mean, 0.0)
        _var += a * a
    var = tl.sum(_var, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    # normalize and apply the affine transform
    for off in tl.range(0, n_cols, BLOCK_SIZE, num_stages=4):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        w = tl.load(w_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        a = tl.load(x_ptr + cols, mask=mask, other=0.0)
        y = (a - mean) * rstd * w + b
        tl.store(y_ptr + cols, y, mask=mask)


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    rstd = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    layernorm_kernel[(n_rows,)](x, y, weight, bias, mean, rstd, x.stride(0), n_cols, eps, BLOCK_SIZE=256)
    return y, mean, rstd


def make_inputs():
    # 8192 x 5120 fp32: 168 MB in (read three times), 168 MB out.
    rows, cols = (8192, 5120) if DEVICE == "cuda" else (6, 333)
    x = torch.randn(rows, cols, device=DEVICE, dtype=torch.float32)
    w = torch.rand(cols, device=DEVICE, dtype=torch.float32) + 0.5
    b = torch.randn(cols, device=DEVICE, dtype=torch.float32)
    return x, w, b


def harness_layernorm():
    x, w, b = make_inputs()
    return layernorm(x, w, b)


def reference_layernorm():
    x, w, b = make_inputs()
    y = torch.nn.functional.layer_norm(x, (x.shape[1],), w, b, eps=1e-5)
    mean = x.mean(dim=1)
    rstd = torch.rsqrt(x.var(dim=1, unbiased=False) + 1e-5)
    return y, mean, rstd

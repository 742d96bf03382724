"""Per-token dynamic int8 quantization (vLLM `scaled_int8_quant` / SGLang
`per_token_quant_int8`): one program per row, absmax -> scale = absmax / 127, round to
nearest. The wrapper returns a dataclass holding the int8 data and the scales."""
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.float16 if DEVICE == "cuda" else torch.float32


@dataclass
class QuantizedTensor:
    data: torch.Tensor   # int8, same shape as the input
    scale: torch.Tensor  # float32, one per row

    def dequantize(self) -> torch.Tensor:
        return self.data.float() * self.scale[:, None]


@triton.jit
def per_token_quant_int8_kernel(x_ptr, q_ptr, scale_ptr, stride_x, stride_q, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    absmax = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10)
    scale = absmax / 127.0
    y = x / scale
    y = tl.where(y >= 0, y + 0.5, y - 0.5)  # round half away from zero, then truncate
    tl.store(q_ptr + row * stride_q + cols, y.to(tl.int8), mask=mask)
    tl.store(scale_ptr + row, scale)


def per_token_quant_int8(x: torch.Tensor) -> QuantizedTensor:
    M, N = x.shape
    q = torch.empty((M, N), device=x.device, dtype=torch.int8)
    scale = torch.empty((M,), device=x.device, dtype=torch.float32)
    per_token_quant_int8_kernel[(M,)](x, q, scale, x.stride(0), q.stride(0), N,
                                      BLOCK=triton.next_power_of_2(N), num_warps=1)
    return QuantizedTensor(q, scale)


def test_per_token_quant_int8():
    x = torch.randn(7, 211, device=DEVICE, dtype=DTYPE)
    qt = per_token_quant_int8(x)
    assert qt.data.dtype == torch.int8
    torch.testing.assert_close(qt.dequantize(), x.float(), atol=float(qt.scale.max()) * 0.51 + 1e-3, rtol=0)
    return qt


def bench_per_token_quant_int8():
    # 16k tokens of hidden 8192 in fp16 (an activation before an int8 GEMM)
    M, N = (16384, 8192) if DEVICE == "cuda" else (5, 100)
    return per_token_quant_int8(torch.randn(M, N, device=DEVICE, dtype=DTYPE))

"""Temperature-scaled log-softmax over the vocabulary for sampling (SGLang / vLLM sampler
style): one program per request row, each row with its own temperature. The wrapper
returns a `SamplerOutput` object wrapping the log-probabilities and the per-row max."""
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class SamplerOutput:
    logprobs: torch.Tensor   # (batch, vocab) float32
    max_logit: torch.Tensor  # (batch,) float32, scaled by 1 / temperature

    def greedy(self) -> torch.Tensor:
        return self.logprobs.argmax(dim=-1)


@triton.jit
def temperature_log_softmax_kernel(logits_ptr, temp_ptr, out_ptr, max_ptr, stride_in, stride_out, vocab,
                                   BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < vocab
    t = tl.load(temp_ptr + row)
    x = tl.load(logits_ptr + row * stride_in + cols, mask=mask, other=-float("inf")).to(tl.float32) / t
    m = tl.max(x, axis=0)
    lse = tl.log(tl.sum(tl.exp(x - m), axis=0)) + m
    tl.store(out_ptr + row * stride_out + cols, x - lse, mask=mask)
    tl.store(max_ptr + row, m)


def temperature_log_softmax(logits: torch.Tensor, temperatures: torch.Tensor) -> SamplerOutput:
    batch, vocab = logits.shape
    out = torch.empty((batch, vocab), device=logits.device, dtype=torch.float32)
    mx = torch.empty((batch,), device=logits.device, dtype=torch.float32)
    temperature_log_softmax_kernel[(batch,)](logits, temperatures, out, mx, logits.stride(0), out.stride(0), vocab,
                                             BLOCK_SIZE=triton.next_power_of_2(vocab), num_warps=4)
    return SamplerOutput(out, mx)


def make_inputs(batch: int, vocab: int):
    logits = torch.randn(batch, vocab, device=DEVICE, dtype=torch.float32) * 4
    temps = torch.rand(batch, device=DEVICE, dtype=torch.float32) + 0.5
    return logits, temps


def test_temperature_log_softmax():
    logits, temps = make_inputs(5, 1001)
    res = temperature_log_softmax(logits, temps)
    ref = torch.log_softmax(logits / temps[:, None], dim=-1)
    torch.testing.assert_close(res.logprobs, ref, atol=1e-4, rtol=1e-4)
    return res


def bench_temperature_log_softmax():
    # a decode batch of 1024 requests over a 32k vocabulary (Llama-2 / Mistral), fp32 logits
    batch, vocab = (1024, 32000) if DEVICE == "cuda" else (3, 700)
    return temperature_log_softmax(*make_inputs(batch, vocab))

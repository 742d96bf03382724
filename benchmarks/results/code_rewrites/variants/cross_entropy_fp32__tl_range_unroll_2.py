"""Cross-entropy forward (per-row loss) over fp32 logits: one program per row, a
first pass for the row max and a second for the sum of exponentials, in blocks of
1024 columns."""
import torch
import triton
import triton.language as tl

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def cross_entropy_kernel(logits_ptr, target_ptr, loss_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    row_ptr = logits_ptr + row * row_stride
    _max = tl.full([BLOCK_SIZE], -float("inf"), dtype=tl.float32)
    for off in tl.range(0, n_cols, BLOCK_SIZE, loop_unroll_factor=2):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_ptr + cols, mask=cols < n_cols, other=-float("inf"))
        _max = tl.maximum(_max, x)
    m = tl.max(_max, axis=0)
    _sum = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in tl.range(0, n_cols, BLOCK_SIZE, loop_unroll_factor=2):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(row_ptr + cols, mask=mask, other=0.0)
        _sum += tl.where(mask, tl.exp(x - m), 0.0)
    lse = m + tl.log(tl.sum(_sum, axis=0))
    target = tl.load(target_ptr + row)
    target_logit = tl.load(row_ptr + target)
    tl.store(loss_ptr + row, lse - target_logit)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = logits.shape
    loss = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
    cross_entropy_kernel[(n_rows,)](logits, target, loss, logits.stride(0), n_cols, BLOCK_SIZE=1024)
    return loss


def make_inputs():
    # 4096 tokens x 32000 vocabulary fp32: 524 MB of logits.
    rows, vocab = (4096, 32000) if DEVICE == "cuda" else (5, 1500)
    logits = torch.randn(rows, vocab, device=DEVICE, dtype=torch.float32)
    target = torch.randint(0, vocab, (rows,), device=DEVICE, dtype=torch.int64)
    return logits, target


def harness_cross_entropy():
    logits, target = make_inputs()
    return cross_entropy(logits, target)


def reference_cross_entropy():
    logits, target = make_inputs()
    return torch.nn.functional.cross_entropy(logits, target, reduction="none")

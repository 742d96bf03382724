"""Tier 1: reading compile metadata from CompiledKernel shapes of Triton 3.2 .. 3.9."""
from collections import namedtuple
from types import SimpleNamespace

from kernelband.profile.schema import DeviceFacts
from kernelband.profile.static import find_compiled, kernel_metadata, static_profile

Target = namedtuple("GPUTarget", "backend arch warp_size")
TTIR = """
  %24 = tt.dot %21, %22, %23 : tensor<32x32xf16> * tensor<32x32xf16> -> tensor<32x32xf32>
"""


def ck_39(n_regs=40, shared=8192, num_warps=4, name="matmul_kernel"):
    """Triton 3.4+: metadata namedtuple with warp_size; n_regs/n_spills/n_max_threads set at load."""
    Md = namedtuple("KernelMetadata", "name shared num_warps num_stages num_ctas warp_size target")
    return SimpleNamespace(metadata=Md(name, shared, num_warps, 3, 1, 32, Target("cuda", 90, 32)),
                           n_regs=n_regs, n_spills=0, n_max_threads=1024, hash="h39", asm={"ttir": TTIR})


def ck_32():
    """Triton 3.2: no warp_size in metadata (it is on target), no n_max_threads."""
    Md = namedtuple("KernelMetadata", "name shared num_warps num_stages num_ctas target")
    return SimpleNamespace(metadata=Md("axpy_kernel", 0, 8, 2, 1, Target("cuda", 80, 32)), n_regs=24, n_spills=2,
                           hash="h32", asm={})


class LazyKernel:
    """A kernel whose binary is not loaded yet: n_regs appears after _init_handles."""

    def __init__(self):
        self.metadata = {"name": "k", "shared": 1024, "num_warps": 2, "num_stages": 1}  # dict metadata (older)
        self.hash = "lazy"

    def _init_handles(self):
        self.n_regs, self.n_spills = 64, 0


def test_metadata_of_each_shape():
    m = kernel_metadata(ck_39())
    assert (m["n_regs"], m["n_spills"], m["shared_bytes"], m["num_warps"], m["num_stages"]) == (40, 0, 8192, 4, 3)
    assert m["threads_per_program"] == 128 and m["max_threads"] == 1024
    m = kernel_metadata(ck_32())
    assert (m["n_regs"], m["n_spills"], m["num_warps"], m["warp_size"], m["max_threads"]) == (24, 2, 8, 32, None)
    m = kernel_metadata(LazyKernel())
    assert (m["n_regs"], m["shared_bytes"], m["num_warps"], m["num_stages"]) == (64, 1024, 2, 1)


def _jit(caches=None, cache=None):
    jf = SimpleNamespace(arg_names=["a", "b"], fn=lambda: None)
    if caches is not None:
        jf.device_caches = caches
    if cache is not None:
        jf.cache = cache
    return jf


def test_find_compiled_prefers_the_launch_result():
    k = ck_39()
    launch = SimpleNamespace(result=k, obj=_jit(), name="matmul_kernel")
    assert find_compiled(launch) == (k, "launch result")


def test_find_compiled_in_the_jit_caches_through_an_autotuner():
    old, new = ck_39(n_regs=10), ck_39(n_regs=99)
    jf = _jit(caches={0: ({"key1": old, "key2": new}, {}, None, None, None)})  # 3.3+
    autotuner = SimpleNamespace(fn=jf, arg_names=["a", "b"])
    got, where = find_compiled(SimpleNamespace(result=None, obj=autotuner, name="matmul_kernel"))
    assert got is new and "JIT cache" in where
    jf32 = _jit(cache={0: {"k": ck_32()}})  # 3.2
    got, _ = find_compiled(SimpleNamespace(result=None, obj=jf32, name="axpy_kernel"))
    assert got.hash == "h32"
    assert find_compiled(SimpleNamespace(result=None, obj=_jit(), name="x")) == (None, "")


def test_static_profile_with_occupancy_and_dot_tiles():
    facts = DeviceFacts(compute_capability="9.0", sm_count=132)
    launch = SimpleNamespace(result=ck_39(n_regs=128, num_warps=8), obj=_jit(), name="matmul_kernel")
    st, why = static_profile(launch, facts, programs=264)
    assert why == ""
    assert st["occupancy"]["theoretical"] == 0.25 and st["occupancy"]["limiter"] == "registers"
    assert st["occupancy"]["waves"] == 1.0
    assert st["dot_tiles"] == ["32x32xf32"]
    st, why = static_profile(SimpleNamespace(result=None, obj=_jit(), name="x"), facts, None)
    assert st is None and "no compiled kernel" in why

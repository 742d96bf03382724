"""What changed code of a variant may use: the allow-lists behind the screen's grammar
(``kernelband/screen_grammar.py``); this file holds lists and their lookups only.

- builtins: ``SAFE_BUILTINS`` may be used; ``DANGEROUS_BUILTINS`` say why the others that
  read attributes by name, run code or touch files are refused;
- chains from an import (``torch.empty``, ``tl.load``): ``ALLOWED`` modules, namespaces,
  objects and members, looked up by ``chain_verdict``; ``BANNED_MODULES`` and
  ``DENIED_QUALIFIED`` only give the refusals a clearer reason;
- attributes of any other value: ``HOST_VALUE_ATTRIBUTES`` (what tensors, dtypes, devices,
  shapes, numbers, strings, containers and Triton configs have, less ``EXCLUDED_MEMBERS``
  and ``ORIGINAL_ONLY_MEMBERS``: addresses, and the facts every call of the judge holds
  fixed, which changed code reads only where the original does) and
  ``KERNEL_VALUE_ATTRIBUTES`` (what Triton's values have inside a kernel). The tests
  check both against the installed torch and triton;
- ``TRITON_CALLS``: the configuration Triton's decorators may be given (no hooks);
- imports a variant may add although the original lacks them (``safe_import``).
"""

from __future__ import annotations

import ast
import sys
from typing import Iterable, Optional

# ----------------------------------------------------------------------------- builtins
SAFE_BUILTINS: frozenset[str] = frozenset(
    """len range min max abs int float bool complex str tuple list dict set frozenset isinstance
    issubclass enumerate zip sum any all print round divmod sorted reversed map filter slice pow
    iter next repr hash chr ord hex bin oct callable super object property staticmethod
    classmethod NotImplemented Ellipsis Exception ValueError AssertionError RuntimeError TypeError
    KeyError IndexError LookupError NotImplementedError ZeroDivisionError ArithmeticError
    OverflowError StopIteration AttributeError""".split()
)
_DYNAMIC = "dynamic attribute access is not allowed (it takes attribute names as strings)"
_CODE = "code execution is not allowed"
_IO = "file, process, network or native-code access is not allowed"
# Why the builtins that matter most are refused (every builtin not in SAFE_BUILTINS is).
DANGEROUS_BUILTINS: dict[str, str] = {
    **{n: _DYNAMIC for n in ("getattr", "setattr", "delattr", "hasattr", "vars", "dir", "globals", "locals", "type")},
    **{n: _CODE for n in ("eval", "exec", "compile", "breakpoint")},
    **{n: _IO for n in ("open", "input", "exit", "quit", "help", "memoryview", "copyright", "credits", "license")},
}

# ----------------------------------------------------------------------------- modules
MODULE = "module"  # only the members listed in ALLOWED
NAMESPACE = "namespace"  # any public member that is not itself a module (one segment more)
LEAF = "leaf"  # an object: its public attributes may be read (torch.float16.itemsize)
MEMBER = "member"  # exactly this name, nothing under it

_TORCH_LEAVES = """
Tensor Size dtype device Generator finfo iinfo no_grad inference_mode enable_grad
float16 float32 float64 bfloat16 half float double int8 int16 int32 int64 uint8 bool long int short
complex64 complex128 float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz uint16 uint32 uint64
empty empty_like empty_strided zeros zeros_like ones ones_like full full_like arange linspace logspace
eye tensor as_tensor as_strided from_numpy rand rand_like randn randn_like randint randint_like randperm
normal cat concat concatenate stack hstack vstack split chunk narrow unbind where clamp clip
minimum maximum fmax fmin abs neg exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan tanh sinh
cosh asin acos atan atan2 sigmoid relu erf erfc erfinv softmax log_softmax logsumexp matmul mm bmm addmm
baddbmm addmv mv dot vdot outer einsum tensordot sum nansum mean nanmean max min amax amin argmax argmin
prod cumsum cumprod var std var_mean std_mean norm allclose isclose equal isnan isinf isfinite nan_to_num
pow floor ceil round trunc frac sign signbit reciprocal square mul multiply add sub subtract div divide
true_divide floor_divide fmod remainder lerp addcmul addcdiv transpose permute reshape flatten squeeze
unsqueeze broadcast_to broadcast_tensors broadcast_shapes gather scatter scatter_add scatter_reduce
index_select index_add index_copy masked_fill masked_select take topk sort argsort kthvalue median
flip roll tril triu tril_indices triu_indices diag diagonal bucketize searchsorted unique cdist
bitwise_and bitwise_or bitwise_xor bitwise_not logical_and logical_or logical_not logical_xor eq ne lt
le gt ge numel is_tensor is_floating_point is_complex promote_types result_type can_cast count_nonzero
nonzero any all repeat_interleave tile t conj real imag clone zeros_like full_like contiguous_format
channels_last preserve_format strided sparse_coo gelu silu layer_norm group_norm dropout embedding
""".split()
_CUDA_LEAVES = """is_available current_device get_device_name get_device_properties get_device_capability
device_count synchronize device is_bf16_supported""".split()
_TRITON_LEAVES = "jit autotune Config heuristics cdiv next_power_of_2".split()
_TYPING_MEMBERS = "Optional Union Tuple List Dict Any Callable Sequence Iterable Mapping".split()
# wraps / update_wrapper copy attributes named by strings, reduce(getattr, ...) reads them
_FUNCTOOLS_MEMBERS = "partial lru_cache cache".split()
# Device queries from Triton's tutorials (persistent kernels size their grid by SM count);
# the rest of triton.runtime (binary loading, caches, hooks) stays denied.
_TRITON_RUNTIME_MEMBERS = """triton.runtime.driver.active.get_active_torch_device
triton.runtime.driver.active.get_current_device triton.runtime.driver.active.get_current_target
triton.runtime.driver.active.utils.get_device_properties""".split()

ALLOWED: dict[str, str] = {
    "torch": MODULE,
    "torch.nn": MODULE,
    "torch.nn.functional": NAMESPACE,
    "torch.cuda": MODULE,
    "torch.linalg": NAMESPACE,
    "torch.special": NAMESPACE,
    "triton": MODULE,
    "triton.language": NAMESPACE,
    "triton.language.math": NAMESPACE,
    "triton.language.extra": MODULE,
    "triton.language.extra.cuda": MODULE,
    "triton.language.extra.libdevice": NAMESPACE,
    "triton.language.extra.cuda.libdevice": NAMESPACE,
    "math": NAMESPACE,
    "itertools": NAMESPACE,
    "functools": MODULE,
    "typing": MODULE,
    "triton.runtime": MODULE,
    "triton.runtime.driver": MODULE,
    "triton.runtime.driver.active": MODULE,
    "triton.runtime.driver.active.utils": MODULE,
    **{n: MEMBER for n in _TRITON_RUNTIME_MEMBERS},
    # TMA descriptors (Hopper matmuls); the rest of triton.tools (disassembler, AOT compiler)
    # stays denied, and so does triton.set_allocator (a Python function called at launches)
    "triton.tools.tensor_descriptor.TensorDescriptor": LEAF,
    **{f"functools.{n}": MEMBER for n in _FUNCTOOLS_MEMBERS},
    **{f"torch.{n}": LEAF for n in _TORCH_LEAVES},
    **{f"torch.cuda.{n}": LEAF for n in _CUDA_LEAVES},
    **{f"triton.{n}": LEAF for n in _TRITON_LEAVES},
    **{f"typing.{n}": MEMBER for n in _TYPING_MEMBERS},
}
# Members of the wildcard namespaces that are modules (found by introspection; the test
# suite re-checks them against the installed torch/triton). Any stdlib module name or
# well-known alias is refused as a member too, whatever the version.
NAMESPACE_MODULE_MEMBERS: dict[str, frozenset[str]] = {
    "triton.language": frozenset({"core", "random", "standard", "target_info", "semantic"}),
    "triton.language.math": frozenset({"core"}),
    "triton.language.extra.cuda.libdevice": frozenset({"core"}),
    "triton.language.extra.libdevice": frozenset({"core"}),
    "torch.nn.functional": frozenset({"dataclasses", "grad", "importlib", "math", "np", "torch", "warnings"}),
    "torch.special": frozenset({"torch"}),
}
_MODULE_LIKE_NAMES: frozenset[str] = frozenset(getattr(sys, "stdlib_module_names", ())) | {
    "np",
    "numpy",
    "torch",
    "triton",
    "tl",
    "F",
    "os",
    "sys",
    "builtins",
    "importlib",
    "pkgutil",
    "core",
}

# Imports a variant may add although the original lacks them: pure numeric, typing and
# Triton language modules (what they expose is still looked up name by name).
SAFE_IMPORT_MODULES: frozenset[str] = frozenset(
    {"math", "itertools", "torch", "torch.nn", "torch.nn.functional", "triton", "triton.language"}
)
SAFE_IMPORT_FROM: frozenset[str] = frozenset(
    {
        "math",
        "itertools",
        "torch",
        "triton",
        "triton.language",
        "triton.language.extra",
        "triton.language.extra.cuda",
        "triton.language.extra.libdevice",
        "triton.language.extra.cuda.libdevice",
        "typing",
        "torch.nn",
        "torch.nn.functional",
        "triton.tools.tensor_descriptor",
    }
)
# What a prompt may tell an LLM it can import (the original's own imports come on top).
ALLOWED_IMPORTS: frozenset[str] = frozenset({"__future__"}) | SAFE_IMPORT_MODULES | SAFE_IMPORT_FROM

# Modules (and their submodules) and qualified names inside allowed packages that read or
# write files, run code, load native code or change global hooks: refused with that
# reason (anything else off the allow-list is refused as unlisted).
BANNED_MODULES: frozenset[str] = frozenset(
    """os sys subprocess socket shutil pathlib ctypes importlib builtins io pickle marshal shelve
    multiprocessing threading _thread signal tempfile glob urllib http requests ftplib smtplib asyncio
    inspect gc code codeop pty runpy pkgutil zipimport codecs fileinput mmap select selectors ssl
    concurrent atexit sysconfig platform webbrowser logging linecache dbm sqlite3 zipfile tarfile
    gzip bz2 lzma csv json copyreg types weakref site sched ast dis""".split()
)
DENIED_QUALIFIED: tuple[str, ...] = (
    "torch.load",
    "torch.save",
    "torch.serialization",
    "torch.hub",
    "torch.utils",
    "torch.ops",
    "torch.classes",
    "torch.library",
    "torch.jit",
    "torch.package",
    "torch.distributed",
    "torch.multiprocessing",
    "torch.compile",
    "torch.from_file",
    "torch.overrides",
    "torch.backends",
    "torch.cuda.memory",
    "torch.cuda.nvtx",
    "torch.profiler",
    "torch.export",
    "torch.onnx",
    "torch.fx",
    "numpy.load",
    "numpy.save",
    "numpy.savez",
    "numpy.savez_compressed",
    "numpy.savetxt",
    "numpy.loadtxt",
    "numpy.genfromtxt",
    "numpy.fromfile",
    "numpy.fromregex",
    "numpy.memmap",
    "numpy.ctypeslib",
    "numpy.lib",
    "numpy.rec",
    "numpy.f2py",
    "numpy.distutils",
    "numpy.testing",
    "numpy.DataSource",
    "numpy.core",
    "triton.knobs",
    "triton.runtime",
    "triton.tools",
    "triton.backends",
    "triton.compiler",
    "triton.compile",
    "operator.attrgetter",
    "operator.methodcaller",
    "functools.reduce",
    "functools.wraps",
    "functools.update_wrapper",
    "triton.set_allocator",
    # inline assembly is not Triton code: what it reads, writes or times is not Triton's semantics
    "triton.language.inline_asm_elementwise",
    "typing.get_type_hints",
    "typing.ForwardRef",
    "dataclasses.make_dataclass",
    "warnings.formatwarning",
    "warnings.showwarning",
    "warnings.warn_explicit",
)
# ----------------------------------------------------------------------------- values
# Attributes of the values a wrapper works with: public members of torch.Tensor, dtype,
# device, Size, finfo / iinfo, Python's numbers, strings and containers, triton.Config,
# TensorDescriptor and CUDA device properties (generated from torch 2.13 / triton 3.9;
# tests/test_screen.py checks each name against the installed versions). Frames,
# globals, code objects, modules, storages and numpy's file methods are not among them.
HOST_VALUE_ATTRIBUTES: frozenset[str] = frozenset(
    """
H L2_cache_size T abbr abs abs_ absolute absolute_ acos acos_ acosh acosh_ add add_ addbmm addbmm_ addcdiv
addcdiv_ addcmul addcmul_ addmm addmm_ addmv addmv_ addr addr_ adjoint all all_kwargs allclose amax amin
aminmax angle any append arccos arccos_ arccosh arccosh_ arcsin arcsin_ arcsinh arcsinh_ arctan arctan2
arctan2_ arctan_ arctanh arctanh_ argmax argmin argsort argwhere as_integer_ratio as_strided as_strided_
as_strided_scatter as_subclass asin asin_ asinh asinh_ atan atan2 atan2_ atan_ atanh atanh_ baddbmm baddbmm_
base bernoulli bernoulli_ bfloat16 bincount bit_count bit_length bits bitwise_and bitwise_and_
bitwise_left_shift bitwise_left_shift_ bitwise_not bitwise_not_ bitwise_or bitwise_or_ bitwise_right_shift
bitwise_right_shift_ bitwise_xor bitwise_xor_ block_shape bmm bool broadcast_to byte capitalize casefold
cauchy_ ccol_indices cdouble ceil ceil_ center cfloat chalf char cholesky cholesky_inverse cholesky_solve
chunk clamp clamp_ clamp_max clamp_max_ clamp_min clamp_min_ clear clip clip_ clone coalesce col_indices conj
conj_physical conj_physical_ conjugate contiguous copy copy_ copysign copysign_ corrcoef cos
cos_ cosh cosh_ count count_nonzero cov cpu cross crow_indices cuda cummax cummin cumprod cumprod_ cumsum
cumsum_ data deg2rad deg2rad_ denominator dense_dim dequantize det detach detach_ device diag
diag_embed diagflat diagonal diagonal_scatter diff difference difference_update digamma digamma_ dim dim_order
discard dist div div_ divide divide_ dot double dsplit dtype eig element_size encode endswith eps eq eq_ equal
erf erf_ erfc erfc_ erfinv erfinv_ exp exp2 exp2_ exp_ expand expand_as expandtabs expm1 expm1_ exponential_
extend fill_ fill_diagonal_ find fix fix_ flatten flip fliplr flipud float float_power float_power_ floor
floor_ floor_divide floor_divide_ fmax fmin fmod fmod_ format format_map frac frac_ frexp from_bytes
from_tensor fromhex fromkeys gather gcd gcd_ ge ge_ geometric_ geqrf ger get get_device
greater greater_ greater_equal greater_equal_ gt gt_ half hardshrink hash_tensor heaviside heaviside_ hex
histc histogram hsplit hypot hypot_ i0 i0_ igamma igamma_ igammac igammac_ imag index index_add index_add_
index_copy index_copy_ index_fill index_fill_ index_put index_put_ index_reduce index_reduce_ index_select
indices inner insert int int_repr intersection intersection_update inverse ipu is_coalesced is_complex is_conj
is_contiguous is_cpu is_cuda is_distributed is_floating_point is_integer is_ipu is_maia
is_meta is_mkldnn is_mps is_mtia is_neg is_nested is_nonzero is_quantized is_same_size is_set_to
is_signed is_sparse is_sparse_csr is_vulkan is_xla is_xpu isalnum isalpha isascii isclose isdecimal
isdigit isdisjoint isfinite isidentifier isinf islower isnan isneginf isnumeric isposinf isprintable isreal
isspace issubset issuperset istft istitle isupper item items itemsize join keys kron kthvalue kwargs layout
lcm lcm_ ldexp ldexp_ le le_ lerp lerp_ less less_ less_equal less_equal_ lgamma lgamma_ ljust log log10
log10_ log1p log1p_ log2 log2_ log_ log_normal_ log_softmax logaddexp logaddexp2 logcumsumexp logdet
logical_and logical_and_ logical_not logical_not_ logical_or logical_or_ logical_xor logical_xor_ logit logit_
logsumexp long lower lstrip lstsq lt lt_ lu lu_solve mH mT major maketrans masked_fill masked_fill_
masked_scatter masked_scatter_ masked_select matmul matrix_exp matrix_power max
max_threads_per_multi_processor maximum maxnreg mean median min minimum minor mm mode moveaxis movedim msort
mtia mul mul_ multi_processor_count multinomial multiply multiply_ mv mvlgamma mvlgamma_ name nan_to_num
nan_to_num_ nanmean nanmedian nanquantile nansum narrow narrow_copy nbytes ndim ndimension ne ne_ neg neg_
negative negative_ nelement new new_empty new_empty_strided new_full new_ones new_tensor new_zeros nextafter
nextafter_ nonzero nonzero_static norm normal_ not_equal not_equal_ num_ctas num_stages num_warps numel
numerator numpy orgqr ormqr outer padding partition permute pin_memory pinverse polygamma polygamma_
pop popitem positive pow pow_ prelu prod put put_ q_per_channel_axis q_per_channel_scales
q_per_channel_zero_points q_scale q_zero_point qr qscheme quantile rad2deg rad2deg_ random_ ravel real
reciprocal reciprocal_ regs_per_multiprocessor reinforce relu relu_ remainder remainder_ remove removeprefix
removesuffix renorm renorm_ repeat repeat_interleave replace reshape reshape_as
resize resize_ resize_as resize_as_ resize_as_sparse_ resolution resolve_conj resolve_neg
reverse rfind rindex rjust roll rot90 round round_ round_f32_to_tf32 row_indices rpartition
rsplit rsqrt rsqrt_ rstrip scatter scatter_ scatter_add scatter_add_ scatter_reduce scatter_reduce_ select
select_scatter set_ setdefault sgn sgn_ shape shared_memory_per_block shared_memory_per_block_optin
shared_memory_per_multiprocessor short sigmoid sigmoid_ sign sign_ signbit sin sin_ sinc sinc_ sinh sinh_ size
slice_inverse slice_scatter slogdet smallest_normal smm softmax solve sort sparse_dim sparse_mask
sparse_resize_ sparse_resize_and_clear_ split split_with_sizes splitlines sqrt sqrt_ square square_ squeeze
squeeze_ sspaddmm start startswith std step stft stop storage_offset stride strides strip sub sub_ subtract
subtract_ sum sum_to_size svd swapaxes swapaxes_ swapcase swapdims swapdims_ symeig symmetric_difference
symmetric_difference_update t t_ take take_along_dim tan tan_ tanh tanh_ tensor_split tile tiny title to
to_bytes to_complex to_dense to_mkldnn to_padded_tensor to_real to_sparse to_sparse_bsc to_sparse_bsr
to_sparse_coo to_sparse_csc to_sparse_csr tolist topk total_memory trace translate transpose transpose_
triangular_solve tril tril_ triu triu_ true_divide true_divide_ trunc trunc_ type type_as unbind unflatten
unfold uniform_ union unique unique_consecutive unsafe_chunk unsafe_split unsafe_split_with_sizes unsqueeze
unsqueeze_ update upper uuid values var vdot view view_as vsplit warp_size where xlogy xlogy_ xpu
zero_ zfill
""".split()
)
# Tensor members left out: they reach storages and shared memory, register Python hooks
# that run later (autograd, streams) or call Python on every element. Addresses too: a
# kernel given a buffer's address (or its offset from an argument) as an integer reaches
# memory no launch argument covers, which no replay restores (round 3, CARRIED).
EXCLUDED_MEMBERS: frozenset[str] = frozenset(
    """storage untyped_storage storage_type share_memory_ register_hook register_post_accumulate_grad_hook
    backward module_load grad_fn apply_ map_ map2_ record_stream handle to_ir codegen_name mangle
    cache_key_part data_ptr const_data_ptr mutable_data_ptr""".split()
)
# Of those, what a variant may use where the original reads the same member (by name: an
# original that checks alignment or builds descriptors from addresses keeps doing so in
# the code a rewrite changes).
ADDRESS_MEMBERS: frozenset[str] = frozenset({"data_ptr", "const_data_ptr", "mutable_data_ptr"})
# Facts about a tensor that every call the judge makes holds fixed (fresh leaf tensors that
# need no gradient, in pageable memory, outside inference mode): a branch on them runs only
# for users, so no call of the judge would test it.
PROVENANCE_MEMBERS: frozenset[str] = frozenset(
    """requires_grad requires_grad_ is_leaf grad grad_dtype retains_grad retain_grad output_nr is_inference
    is_pinned is_shared volatile""".split()
)
# Which GPU a call runs on: every call of the judge runs on its worker's one visible device
# (index 0), so reading the index, or choosing the current device, branches on a fact no call
# varies (a user's tensors on cuda:1). ``index`` only where it is read, not called (a list's
# ``index(...)``); numbered devices in literals and arguments are the grammar's (``device_by_number``).
DEVICE_INDEX_MEMBERS: frozenset[str] = frozenset(
    "get_device current_device device_count set_device get_current_device index".split()
)
ORIGINAL_ONLY_MEMBERS: frozenset[str] = ADDRESS_MEMBERS | PROVENANCE_MEMBERS | DEVICE_INDEX_MEMBERS
# Attributes of Triton's values inside a kernel (tl.tensor, dtype, pointer_type,
# block_type, constexpr), less its IR internals (handle, to_ir...).
KERNEL_VALUE_ATTRIBUTES: frozenset[str] = frozenset(
    """
FP_TYPES KIND OTHER_TYPES SIGNEDNESS SINT_TYPES STANDARD_FP_TYPES T UINT_TYPES abs address_space advance
argmax argmin associative_scan atomic_add atomic_and atomic_cas atomic_load atomic_max atomic_min atomic_or
atomic_poll atomic_store atomic_xchg atomic_xor block_shape broadcast_to cast cdiv ceil cos cumprod cumsum
dtype element_ty erf exp exp2 expand_dims exponent_bias flip floor fp_mantissa_width gather get_block_shapes
get_int_max_value get_int_min_value histogram int_bitwidth is_bf16 is_block is_bool is_const is_dtype
is_floating is_fp16 is_fp32 is_fp64 is_fp8 is_fp8e4b15 is_fp8e4b8 is_fp8e4nv is_fp8e5 is_fp8e5b16 is_int
is_int1 is_int16 is_int32 is_int64 is_int8 is_int_signed is_int_unsigned is_ptr is_standard_floating is_uint16
is_uint32 is_uint64 is_uint8 is_void item kind log log2 logical_and logical_or max min name nbytes numel
permute primitive_bitwidth ravel reduce reduce_or reshape rsqrt scalar shape sigmoid sin softmax sort split
sqrt sqrt_rn store sum to trans type value view with_element_ty xor_sum
""".split()
)

# Triton calls with their allowed configuration: (most positional arguments, keywords).
# Left out: pre_hook / post_hook / do_bench / launch_metadata, Python run around launches.
TRITON_CALLS: dict[str, tuple[int, frozenset[str]]] = {
    "triton.jit": (1, frozenset({"do_not_specialize", "do_not_specialize_on_alignment", "debug", "noinline"})),
    "triton.autotune": (
        2,
        frozenset(
            {"configs", "key", "prune_configs_by", "reset_to_zero", "restore_value", "warmup", "rep", "cache_results"}
        ),
    ),
    "triton.heuristics": (1, frozenset({"values"})),
    "triton.Config": (4, frozenset({"kwargs", "num_warps", "num_stages", "num_ctas", "maxnreg"})),
}


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _private(name: str) -> bool:
    return name.startswith("_")


# ----------------------------------------------------------------------------- imports
def import_keys(node: ast.Import | ast.ImportFrom) -> Iterable[tuple[str, str, str]]:
    """(key, module, name) for each name an import binds; key is its canonical text."""
    if isinstance(node, ast.Import):
        for a in node.names:
            yield f"import {a.name}" + (f" as {a.asname}" if a.asname else ""), a.name, ""
    else:
        module = "." * node.level + (node.module or "")
        for a in node.names:
            yield f"from {module} import {a.name}" + (f" as {a.asname}" if a.asname else ""), module, a.name


def safe_import(module: str, name: str) -> bool:
    """An import a variant may add although the original lacks it."""
    if not name:
        return module in SAFE_IMPORT_MODULES
    if module == "__future__":
        return name == "annotations"
    if module not in SAFE_IMPORT_FROM or name == "*":
        return False
    status, _ = chain_verdict(f"{module}.{name}", frozenset())
    return status in ("ok", "module")


# ----------------------------------------------------------------------------- chains
def _public_member(namespace: str, member: str) -> bool:
    return (
        not _private(member)
        and member not in NAMESPACE_MODULE_MEMBERS.get(namespace, ())
        and (member not in _MODULE_LIKE_NAMES)
    )


def _listed_object(segs: list[str]) -> Optional[tuple[str, str]]:
    """The verdict for a chain that is a curated MEMBER, or a curated LEAF followed by
    attributes its values have (``torch.float16.itemsize``, ``TensorDescriptor.from_tensor``);
    None for anything else."""
    for i in range(len(segs), 0, -1):
        prefix = ".".join(segs[:i])
        kind = ALLOWED.get(prefix)
        if kind == MEMBER and i == len(segs):
            return "ok", prefix
        if kind == LEAF:
            bad = next((s for s in segs[i:] if s not in HOST_VALUE_ATTRIBUTES or s in BANNED_MODULES), None)
            return ("unlisted", f"{prefix}.{bad}") if bad else ("ok", ".".join(segs))
    return None


def chain_verdict(chain: str, plain_modules: frozenset[str] | set[str]) -> tuple[str, str]:
    """How a maximal dotted chain (aliases resolved, ``torch.nn.functional.gelu``) may be
    used: ("ok" | "module" | "denied" | "unlisted", the part that decided)."""
    segs = chain.split(".")
    listed = _listed_object(segs)
    if listed is not None:  # a curated object wins over a denied package prefix
        return listed
    for i in range(1, len(segs) + 1):
        prefix = ".".join(segs[:i])
        # a banned module as the root or reached as an attribute (torch.os, F.importlib...)
        if segs[i - 1] in BANNED_MODULES or prefix in DENIED_QUALIFIED:
            return "denied", prefix
    if chain in plain_modules:
        return "module", chain
    cur = segs[0]
    kind = ALLOWED.get(cur)
    if kind is None:
        return "unlisted", chain
    for seg in segs[1:]:  # LEAF prefixes were handled by _listed_object
        nxt = f"{cur}.{seg}"
        if nxt in ALLOWED:
            cur, kind = nxt, ALLOWED[nxt]
        elif kind == NAMESPACE and _public_member(cur, seg):
            cur, kind = nxt, MEMBER
        else:
            return "unlisted", chain
    return ("module", chain) if kind in (MODULE, NAMESPACE) else ("ok", chain)

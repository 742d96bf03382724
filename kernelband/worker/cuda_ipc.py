"""CUDA IPC through the driver API, for the judge to read a variant process's tensors
without a host round trip.

The variant process exports the allocation that holds a tensor (``export``: a 64-byte
``CUipcMemHandle`` and the tensor's byte offset in that allocation); the judge maps the
allocation (``ImportedAllocation``), asks the driver how large it really is, and copies
the bytes it was told about device-to-device into memory it owns (``snapshot``). Nothing
the variant says is trusted beyond "look here": an extent outside the mapped allocation
is refused, and a handle that does not open is an error of the variant.

We call the driver (libcuda) directly instead of torch's ``_share_cuda_``: torch's
protocol also shares a reference-counting file in /dev/shm and an event, both of which a
sandboxed variant process and the judge need not (and should not) share.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any, Optional

HANDLE_BYTES = 64
_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1

_lib: Optional[ctypes.CDLL] = None
_lib_lock = threading.Lock()


class _Handle(ctypes.Structure):
    """CUipcMemHandle: 64 opaque bytes, passed to cuIpcOpenMemHandle by value."""

    _fields_ = [("reserved", ctypes.c_char * HANDLE_BYTES)]


class IpcError(Exception):
    """A handle that cannot be exported, opened or read as described."""


def _driver() -> ctypes.CDLL:
    global _lib
    with _lib_lock:
        if _lib is None:
            try:
                lib = ctypes.CDLL("libcuda.so.1")
            except OSError as e:
                raise IpcError(f"the CUDA driver library is not available: {e}") from None
            lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_Handle), ctypes.c_uint64]
            lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint]
            lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
            lib.cuMemGetAddressRange_v2.argtypes = [
                ctypes.POINTER(ctypes.c_uint64),
                ctypes.POINTER(ctypes.c_size_t),
                ctypes.c_uint64,
            ]
            lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
            lib.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
            lib.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
            lib.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
            _lib = lib
        return _lib


def _check(code: int, what: str) -> None:
    if code != 0:
        raise IpcError(f"{what} failed (CUDA driver error {code})")


def _bind_context(device_index: int) -> None:
    """Make the device's primary context (the one torch uses) current on this thread."""
    lib = _driver()
    ctx = ctypes.c_void_p()
    _check(lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if ctx.value:
        return
    dev = ctypes.c_int()
    _check(lib.cuDeviceGet(ctypes.byref(dev), device_index), "cuDeviceGet")
    _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev.value), "cuDevicePrimaryCtxRetain")
    _check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


def _address_range(ptr: int) -> tuple[int, int]:
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    _check(
        _driver().cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)),
        "cuMemGetAddressRange",
    )
    return int(base.value), int(size.value)


@dataclass(frozen=True)
class Export:
    """Where a tensor lives, as the judge is told: the allocation's IPC handle and the
    tensor's first byte in it. Plain data (hex), safe to put in a JSON header."""

    handle: str  # 128 hex digits
    offset: int  # bytes from the allocation's start to the tensor's data pointer

    def to_dict(self) -> dict[str, Any]:
        return {"handle": self.handle, "offset": self.offset}

    @staticmethod
    def from_dict(d: Any) -> "Export":
        if not isinstance(d, dict):
            raise IpcError("malformed IPC reference")
        handle, offset = d.get("handle"), d.get("offset")
        if not isinstance(handle, str) or len(handle) != 2 * HANDLE_BYTES or not isinstance(offset, int) or offset < 0:
            raise IpcError("malformed IPC reference")
        try:
            bytes.fromhex(handle)
        except ValueError:
            raise IpcError("malformed IPC handle") from None
        return Export(handle, offset)


def export(tensor: Any) -> Export:
    """The IPC reference of a CUDA tensor's memory (in the variant process). Asked anew each
    time (microseconds): an allocation freed and made again at the same address has a new
    handle, and a remembered one would no longer open."""
    ptr = int(tensor.data_ptr())
    _bind_context(tensor.device.index or 0)
    base, _ = _address_range(ptr)
    raw = _Handle()
    _check(_driver().cuIpcGetMemHandle(ctypes.byref(raw), ctypes.c_uint64(base)), "cuIpcGetMemHandle")
    return Export(ctypes.string_at(ctypes.addressof(raw), HANDLE_BYTES).hex(), ptr - base)


class _CudaArray:
    """A raw device buffer as ``__cuda_array_interface__`` (bytes), for a zero-copy view."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 2,
            "strides": None,
        }


class ImportedAllocation:
    """One of the variant's allocations mapped into the judge (open until ``close``)."""

    def __init__(self, handle_hex: str, device_index: int) -> None:
        self.device_index = device_index
        _bind_context(device_index)
        raw = _Handle.from_buffer_copy(bytes.fromhex(handle_hex))
        ptr = ctypes.c_uint64()
        _check(
            _driver().cuIpcOpenMemHandle_v2(ctypes.byref(ptr), raw, _CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            "opening the variant's IPC handle",
        )
        self.base = int(ptr.value)
        try:
            base, self.size = _address_range(self.base)
        except IpcError:
            self.close()
            raise
        if base != self.base:
            self.close()
            raise IpcError("the IPC handle does not map to the start of an allocation")
        self._open = True

    def view(self, offset: int, nbytes: int) -> Any:
        """A uint8 CUDA tensor over [offset, offset + nbytes) of the allocation (no copy);
        refused when that range is not inside what the driver mapped."""
        import torch

        if offset < 0 or nbytes < 0 or offset + nbytes > self.size:
            raise IpcError(
                f"a tensor of {nbytes} bytes at offset {offset} lies outside its allocation ({self.size} bytes)"
            )
        if nbytes == 0:
            return torch.empty(0, dtype=torch.uint8, device=f"cuda:{self.device_index}")
        return torch.as_tensor(_CudaArray(self.base + offset, nbytes), device=f"cuda:{self.device_index}")

    def close(self) -> None:
        if getattr(self, "_open", True) and getattr(self, "base", 0):
            _bind_context(self.device_index)
            _driver().cuIpcCloseMemHandle(ctypes.c_uint64(self.base))
        self._open = False


def strided_extent(shape: list[int], strides: list[int], itemsize: int) -> int:
    """Bytes from a strided tensor's first element to one past its last (0 when empty);
    negative strides are refused by the caller."""
    if any(d == 0 for d in shape):
        return 0
    return (sum((d - 1) * s for d, s in zip(shape, strides)) + 1) * itemsize

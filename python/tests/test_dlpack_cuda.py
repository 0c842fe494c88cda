"""CUDA tensors through DLPack, without a GPU: a fake producer (ctypes) hands out a kDLCUDA
DLManagedTensor over host memory that is never read. Kiln must take it as a device argument on
its device (asking for the data on the legacy default stream, stream=1), export it back as
kDLCUDA and through __cuda_array_interface__, refuse host views of it, and call the producer's
deleter when it lets go."""
import ctypes
import gc

import numpy as np
import pytest

import kiln

kDLCUDA = 2


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeCudaTensor:
    """A float32 'CUDA' tensor whose pointer is host memory (nothing dereferences it here)."""

    def __init__(self, shape, device_id=1, strides=None):
        self.host = np.zeros(int(np.prod(shape)), dtype=np.float32)
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.strides = (ctypes.c_int64 * len(shape))(*strides) if strides else None
        self.device_id = device_id
        self.streams = []
        self.deleted = 0
        self.deleter = DELETER(self._delete)

    def _delete(self, _):
        self.deleted += 1

    def pointer(self):
        return self.host.ctypes.data

    def __dlpack_device__(self):
        return (kDLCUDA, self.device_id)

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        self.managed = DLManagedTensor()
        t = self.managed.dl_tensor
        t.data = self.pointer()
        t.device = DLDevice(kDLCUDA, self.device_id)
        t.ndim = len(self.shape)
        t.dtype = DLDataType(2, 32, 1)  # kDLFloat, 32 bits
        t.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64)) if self.strides else None
        t.byte_offset = 0
        self.managed.deleter = self.deleter
        return _capsule_new(ctypes.addressof(self.managed), b"dltensor", None)


def test_a_cuda_tensor_becomes_a_device_argument_on_its_device():
    fake = FakeCudaTensor((2, 3), device_id=1)
    a = kiln.from_dlpack(fake)
    assert fake.streams == [1], "the producer is asked for its data on the legacy default stream"
    assert a.location == "device" and a.device_id == 1
    assert a.get_shape().lens() == [2, 3] and a.get_shape().type() == "float32"
    assert a.__dlpack_device__() == (kDLCUDA, 1)
    cai = a.__cuda_array_interface__
    assert cai["data"] == (fake.pointer(), False)
    assert cai["shape"] == (2, 3) and cai["strides"] == (12, 4) and cai["typestr"] == "<f4"
    assert cai["version"] == 3 and cai["stream"] is None
    with pytest.raises(Exception, match="device memory"):
        np.asarray(a)
    del a
    gc.collect()
    assert fake.deleted == 1, "kiln lets the producer free its tensor when the last view goes"


def test_strides_and_a_round_trip_through_kiln_keep_the_pointer():
    fake = FakeCudaTensor((4, 5), device_id=0, strides=(1, 4))  # a transposed view
    a = kiln.from_dlpack(fake)
    assert a.get_shape().strides() == [1, 4]
    again = kiln.from_dlpack(a)  # kiln's own kDLCUDA export, taken back
    assert again.location == "device" and again.device_id == 0
    assert again.__cuda_array_interface__["data"][0] == fake.pointer()
    assert again.__cuda_array_interface__["strides"] == (4, 16)
    # A device argument is ready on any stream: __dlpack__ takes the consumer's.
    assert a.__dlpack__(stream=7) is not None


def test_a_host_argument_has_no_cuda_array_interface():
    h = kiln.argument(np.ones((2, 2), dtype=np.float32))
    assert h.location == "host"
    assert not hasattr(h, "__cuda_array_interface__")
    assert h.__dlpack_device__() == (1, 0)

"""DLPack both ways: numpy and torch take kiln arguments without copies, kiln takes torch tensors
without copies (checked by data pointers), and program.run accepts a torch tensor."""
import os

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")


def pointer(array):
    return array.__array_interface__["data"][0]


def test_numpy_takes_a_kiln_argument_without_copying():
    a = kiln.argument(np.arange(12, dtype=np.float32).reshape(3, 4))
    view = np.asarray(a)
    taken = np.from_dlpack(a)
    assert pointer(taken) == pointer(view) and np.shares_memory(taken, view)
    np.testing.assert_array_equal(taken, np.arange(12, dtype=np.float32).reshape(3, 4))
    assert a.__dlpack_device__() == (1, 0)  # kDLCPU


def test_torch_takes_a_kiln_argument_without_copying():
    a = kiln.argument(np.random.default_rng(0).normal(size=(2, 5)).astype(np.float32))
    t = torch.from_dlpack(a)
    assert t.data_ptr() == pointer(np.asarray(a))
    assert t.dtype == torch.float32 and list(t.shape) == [2, 5]
    t2 = torch.utils.dlpack.from_dlpack(a.__dlpack__())
    assert t2.data_ptr() == t.data_ptr()


def test_kiln_takes_a_torch_tensor_without_copying():
    t = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    a = kiln.from_dlpack(t)
    assert pointer(np.asarray(a)) == t.data_ptr()
    assert a.get_shape().lens() == [2, 3, 4] and a.get_shape().type() == "float32"
    del t  # the argument keeps torch's memory alive
    np.testing.assert_array_equal(np.asarray(a), np.arange(24, dtype=np.float32).reshape(2, 3, 4))


@pytest.mark.parametrize("dtype,kiln_type", [(torch.int64, "int64"), (torch.uint8, "uint8"), (torch.float16, "float16"),
                                             (torch.bfloat16, "bfloat16"), (torch.float64, "float64")])
def test_element_types_round_trip(dtype, kiln_type):
    t = (torch.arange(6) % 5).to(dtype).reshape(2, 3)
    a = kiln.from_dlpack(t)
    assert a.get_shape().type() == kiln_type
    back = torch.from_dlpack(a)
    assert back.dtype == dtype and torch.equal(back, t) and back.data_ptr() == t.data_ptr()


def test_a_strided_torch_view_keeps_its_strides():
    t = torch.arange(20, dtype=torch.float32).reshape(4, 5).t()  # a transposed view
    a = kiln.from_dlpack(t)
    assert a.get_shape().strides() == [1, 5]
    np.testing.assert_array_equal(np.asarray(a), t.numpy())


def test_run_accepts_a_torch_tensor(test_model):
    model = kiln.parse_onnx(test_model("add_relu.onnx"))
    model.compile(kiln.get_target("ref"))
    inputs = model.get_inputs()
    feeds_np = {name: np.random.default_rng(i).normal(size=s.lens()).astype(np.float32)
                for i, (name, s) in enumerate(inputs.items())}
    feeds_torch = {name: torch.from_numpy(x.copy()) for name, x in feeds_np.items()}
    want = np.asarray(model.run(feeds_np)[0])
    got = np.asarray(model.run(feeds_torch)[0])
    np.testing.assert_array_equal(got, want)

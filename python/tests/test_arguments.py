"""numpy interop: every dtype round trip, zero-copy in both directions."""
import numpy as np
import pytest

import kiln

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
          "float64"]


def sample(dtype, shape=(2, 3)):
    rng = np.random.RandomState(1)
    if dtype == "bool":
        return rng.rand(*shape) > 0.5
    if dtype.startswith("float"):
        return (rng.randn(*shape) * 10).astype(dtype)
    info = np.iinfo(dtype)
    return rng.randint(max(info.min, -1000), min(info.max, 1000), size=shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_through_a_model(dtype, test_model):
    model = kiln.parse_onnx(test_model("dtypes.onnx"))
    model.compile(kiln.get_target("cpu"))
    feeds = {f"in_{d}": sample(d) for d in DTYPES}
    feeds["in_bfloat16"] = kiln.argument(np.arange(6, dtype=np.uint16).reshape(2, 3) + 0x3F80, type="bfloat16")
    outs = dict(zip(model.get_outputs(), model.run(feeds)))
    got = np.asarray(outs[f"out_{dtype}"])
    assert got.dtype == np.dtype(dtype)
    assert np.array_equal(got, feeds[f"in_{dtype}"])
    bf = outs["out_bfloat16"]
    assert bf.get_shape().type() == "bfloat16"
    assert np.array_equal(np.asarray(bf), np.arange(6, dtype=np.uint16).reshape(2, 3) + 0x3F80)


@pytest.mark.parametrize("dtype", DTYPES)
def test_argument_from_numpy_is_zero_copy(dtype):
    a = sample(dtype, (3, 4))
    arg = kiln.argument(a)
    assert arg.get_shape().type() == dtype
    assert arg.get_shape().lens() == [3, 4]
    view = np.asarray(arg)
    assert np.shares_memory(view, a)
    assert np.array_equal(view, a)
    assert arg.tolist() == a.tolist()


def test_strided_views_keep_their_strides():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = a.T
    arg = kiln.argument(t)
    assert arg.get_shape().strides() == [1, 6]
    assert np.shares_memory(np.asarray(arg), a)
    assert np.array_equal(np.asarray(arg), t)
    rev = a[::-1]  # negative strides cannot be borrowed: copied
    assert np.array_equal(np.asarray(kiln.argument(rev)), rev)


def test_outputs_are_shared_not_copied(test_model):
    model = kiln.parse_onnx(test_model("add_relu.onnx"))
    model.compile(kiln.get_target("ref"))
    out = model.run({"x": np.ones((2, 3), np.float32), "y": -np.arange(6, dtype=np.float32).reshape(2, 3)})[0]
    v1, v2 = np.asarray(out), np.asarray(out)
    assert np.shares_memory(v1, v2)
    assert np.array_equal(v1, np.maximum(1 - np.arange(6).reshape(2, 3), 0))


def test_generate_argument_is_seeded():
    s = kiln.shape("float32", [5, 7])
    a, b, c = kiln.generate_argument(s, 1), kiln.generate_argument(s, 1), kiln.generate_argument(s, 2)
    assert np.array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(a), np.asarray(c))
    assert np.abs(np.asarray(a)).max() <= 1 and np.asarray(a).std() > 0.1

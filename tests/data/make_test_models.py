#!/usr/bin/env python3
"""Writes the small ONNX models the tool and Python tests use (tests/data/models/).

Run by hand with Debian's python3-onnx when a model needs to change; the outputs are committed
so the tests themselves need no ONNX Python package. Weights come from a seeded generator.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
rng = np.random.RandomState(7)


def save(model, name):
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, name))


def add_relu():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("Add", ["x", "y"], ["s"], name="add"), helper.make_node("Relu", ["s"], ["z"], name="relu")]
    g = helper.make_graph(nodes, "add_relu", [x, y], [z])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln-tests"), "add_relu.onnx")


def mlp_dynamic():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    probs = helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 3])
    w1 = numpy_helper.from_array(rng.randn(4, 8).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.randn(8).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.randn(8, 3).astype(np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="bias1"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu1"),
        helper.make_node("MatMul", ["h2", "w2"], ["logits"], name="fc2"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(nodes, "mlp_dynamic", [x], [probs], initializer=[w1, b1, w2])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln-tests"), "mlp_dynamic.onnx")


def dtypes():
    kinds = [("bool", TensorProto.BOOL), ("int8", TensorProto.INT8), ("int16", TensorProto.INT16),
             ("int32", TensorProto.INT32), ("int64", TensorProto.INT64), ("uint8", TensorProto.UINT8),
             ("uint16", TensorProto.UINT16), ("uint32", TensorProto.UINT32), ("uint64", TensorProto.UINT64),
             ("float16", TensorProto.FLOAT16), ("float32", TensorProto.FLOAT), ("float64", TensorProto.DOUBLE),
             ("bfloat16", TensorProto.BFLOAT16)]
    inputs, outputs, nodes = [], [], []
    for name, t in kinds:
        inputs.append(helper.make_tensor_value_info("in_" + name, t, [2, 3]))
        outputs.append(helper.make_tensor_value_info("out_" + name, t, [2, 3]))
        nodes.append(helper.make_node("Identity", ["in_" + name], ["out_" + name], name="id_" + name))
    g = helper.make_graph(nodes, "dtypes", inputs, outputs)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln-tests"), "dtypes.onnx")


if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    add_relu()
    mlp_dynamic()
    dtypes()

#!/usr/bin/env python3
"""Writes the corpus of corrupt and hostile ONNX models (tests/data/bad_models/).

Run by hand with Debian's python3-onnx when a case is added or changed; the outputs are
committed so the tests need no ONNX Python package. Everything is deterministic (seeded).

tests/data/bad_models/expected.tsv lists every file with what Kiln must say about it:
    file <TAB> outcome <TAB> needle|needle|...
outcome is an error code name (parse, unsupported, shape, io, ...), "any" (a kiln::error of any
code, or a successful parse: byte flips may leave a valid model), or "ok" (the model is valid but
hostile, e.g. it claims a huge input; it must parse without allocating what it claims). Every
needle must appear in the error message (they name the node, attribute, input or tensor).
"""
import os
import random
import shutil
import warnings

import onnx
from onnx import AttributeProto, TensorProto, helper

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bad_models")
CASES = []  # (file, outcome, needles)


def write(name, data, outcome, needles=()):
    if isinstance(data, onnx.ModelProto):
        data = data.SerializeToString()
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    for n in needles:
        assert "|" not in n and "\t" not in n, n
    CASES.append((name, outcome, list(needles)))


def model(nodes, inputs, outputs, inits=(), opset=13, functions=(), ir_version=8):
    g = helper.make_graph(nodes, "bad", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="kiln-bad-models",
                          functions=list(functions))
    m.ir_version = ir_version
    return m


def fvi(name, dims, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, dims)


INT4 = 22  # TensorProto.INT4 (newer than this onnx package)
X = fvi("x", [2, 3])
Y = fvi("y", [2, 3])


def raw_tensor(name, dims, nbytes, t=TensorProto.FLOAT):
    tp = TensorProto()
    tp.name, tp.data_type = name, t
    tp.dims.extend(dims)
    tp.raw_data = bytes((i * 7) % 251 for i in range(nbytes))
    return tp


def typed_tensor(name, t, dims, **fields):
    """A tensor with any dims and data fields, consistent or not."""
    tp = TensorProto()
    tp.name, tp.data_type = name, t
    tp.dims.extend(dims)
    for k, v in fields.items():
        getattr(tp, k).extend(v)
    return tp


def add_model(w):
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [X], [Y], [w])


# --- protobuf wire encoding, for files the onnx helpers cannot express ---------------------
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    key = varint((num << 3) | wire)
    if wire == 0:
        return key + varint(payload)
    if wire == 2:
        return key + varint(len(payload)) + payload
    raise ValueError(wire)


def lying_length(num, claimed, payload):
    """A length-delimited field whose length prefix claims `claimed` bytes."""
    return varint((num << 3) | 2) + varint(claimed) + payload


# --- the valid model the truncations and flips start from ----------------------------------
def base_model():
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], [0.5, -1.0, 2.0, 0.25, 3.0, -0.75])
    then_g = helper.make_graph([helper.make_node("Relu", ["s"], ["t"], name="then_relu")], "then", [],
                               [fvi("t", [2, 3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["s"], ["e"], name="else_neg")], "else", [],
                               [fvi("e", [2, 3])])
    nodes = [
        helper.make_node("Add", ["x", "w"], ["s"], name="add"),
        helper.make_node("If", ["cond"], ["b"], name="branch", then_branch=then_g, else_branch=else_g),
        helper.make_node("Constant", [], ["k"], name="const",
                         value=helper.make_tensor("kv", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])),
        helper.make_node("Mul", ["b", "k"], ["m"], name="mul"),
        helper.make_node("Softmax", ["m"], ["y"], name="softmax", axis=1),
    ]
    m = model(nodes, [X, helper.make_tensor_value_info("cond", TensorProto.BOOL, [])], [Y], [w])
    onnx.checker.check_model(m)
    return m


def decodes(data):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an unexpected end-group tag is only a warning here
            onnx.ModelProto().ParseFromString(data)
        return True
    except Exception:  # google.protobuf.message.DecodeError
        return False


def truncations_and_flips():
    base = base_model().SerializeToString()
    write("valid_base.onnx", base, "ok")
    # Cuts that the protobuf decoder must refuse (a cut on a field boundary can leave a
    # valid message, which the unit test's every-byte sweep covers).
    for k in range(1, 8):
        cut = len(base) * k // 8
        while decodes(base[:cut]):
            cut += 1
        write("truncated_%d_of_%d.onnx" % (cut, len(base)), base[:cut], "parse", ["not a valid ONNX model"])
    write("truncated_last_byte.onnx", base[:-1], "parse", ["not a valid ONNX model"])
    rng = random.Random(20250101)
    for i in range(8):
        data = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= rng.randint(1, 255)
        write("flipped_%d.onnx" % i, bytes(data), "any")


def not_models():
    write("empty.onnx", b"", "parse", ["empty"])
    write("not_protobuf.onnx", b"This is not an ONNX model.\n", "parse", ["not a valid ONNX model"])
    assert not decodes(b"This is not an ONNX model.\n")
    # A TensorProto decodes as a ModelProto (mismatched wire types become unknown
    # fields) but has no graph.
    t = helper.make_tensor("t", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
    write("tensor_not_model.onnx", t.SerializeToString(), "parse", ["ONNX model"])
    m = onnx.ModelProto()
    m.ir_version = 8
    m.opset_import.add().version = 13
    write("no_graph.onnx", m, "parse", ["no graph"])
    m = model([helper.make_node("Identity", ["x"], ["y"])], [X], [Y])
    m.ir_version = 0
    write("no_ir_version.onnx", m, "parse", ["no IR version"])


def graph_structure():
    nodes = [helper.make_node("Identity", ["t2"], ["t1"], name="a"),
             helper.make_node("Identity", ["t1"], ["t2"], name="b")]
    write("cycle.onnx", model(nodes, [X], [fvi("t2", [2, 3])]), "parse", ["node 'a'", "'t2' is not defined", "cycle"])
    nodes = [helper.make_node("Add", ["x", "nowhere"], ["y"], name="add_missing")]
    write("undefined_input.onnx", model(nodes, [X], [Y]), "parse", ["node 'add_missing'", "'nowhere' is not defined"])
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="first"), helper.make_node("Neg", ["x"], ["y"], name="second")]
    write("duplicate_output.onnx", model(nodes, [X], [Y]), "parse", ["node 'second'", "'y'", "more than once"])
    write("duplicate_input.onnx", model([helper.make_node("Identity", ["x"], ["y"])], [X, X], [Y]), "parse",
          ["'x'", "declared twice"])
    write("output_not_produced.onnx", model([helper.make_node("Identity", ["x"], ["y"])], [X], [Y, fvi("z", [1])]),
          "parse", ["graph output 'z'"])
    nodes = [helper.make_node("Add", ["x"], ["y"], name="add1")]
    write("missing_required_input.onnx", model(nodes, [X], [Y]), "parse", ["node 'add1'", "input 1"])
    bad = helper.make_tensor_value_info("x", 99, [2])
    write("bad_element_type.onnx", model([helper.make_node("Identity", ["x"], ["y"])], [bad], [Y]), "parse",
          ["'x'", "unknown ONNX element type 99"])
    untyped = onnx.ValueInfoProto()
    untyped.name = "x"
    write("untyped_input.onnx", model([helper.make_node("Identity", ["x"], ["y"])], [untyped], [Y]), "parse",
          ["'x'", "no type"])
    neg = fvi("x", [2, -5])
    write("negative_dim_input.onnx", model([helper.make_node("Identity", ["x"], ["y"])], [neg], [Y]), "parse",
          ["'x'", "negative dimension -5"])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
    write("shape_mismatch.onnx", add_model(w), "shape", ["node 'add'"])
    # Recursion: a model-local function that calls itself.
    f = helper.make_function("local", "Again", ["a"], ["b"], [helper.make_node("Again", ["a"], ["b"], domain="local")],
                             [helper.make_opsetid("", 13), helper.make_opsetid("local", 1)])
    m = model([helper.make_node("Again", ["x"], ["y"], domain="local", name="call")], [X], [Y], functions=[f])
    m.opset_import.append(helper.make_opsetid("local", 1))
    write("recursive_function.onnx", m, "parse", ["32 deep"])


def attributes():
    n = helper.make_node("Softmax", ["x"], ["y"], name="softmax")
    n.attribute.append(helper.make_attribute("axis", [1]))
    write("attr_ints_for_int.onnx", model([n], [X], [Y]), "parse",
          ["node 'softmax'", "attribute 'axis'", "type int", "ints"])
    n = helper.make_node("LeakyRelu", ["x"], ["y"], name="leaky")
    n.attribute.append(helper.make_attribute("alpha", "big"))
    write("attr_string_for_float.onnx", model([n], [X], [Y]), "parse",
          ["node 'leaky'", "attribute 'alpha'", "type float", "string"])
    n = helper.make_node("Transpose", ["x"], ["y"], name="transpose")
    n.attribute.append(helper.make_attribute("perm", 1.5))
    write("attr_float_for_ints.onnx", model([n], [X], [fvi("y", [3, 2])]), "parse",
          ["node 'transpose'", "attribute 'perm'", "type ints", "float"])
    n = helper.make_node("Constant", [], ["y"], name="const")
    n.attribute.append(helper.make_attribute("value_int", "seven"))
    write("attr_string_for_int.onnx", model([n], [], [fvi("y", [])]), "parse",
          ["node 'const'", "attribute 'value_int'", "type int", "string"])
    # The type field says INT, the graph field is what is set.
    n = helper.make_node("If", ["c"], ["y"], name="branch")
    a = n.attribute.add()
    a.name, a.type, a.i = "then_branch", AttributeProto.INT, 3
    a = n.attribute.add()
    a.name, a.type, a.i = "else_branch", AttributeProto.INT, 4
    write("attr_int_for_graph.onnx", model([n], [helper.make_tensor_value_info("c", TensorProto.BOOL, [])], [Y]),
          "parse", ["node 'branch'", "attribute 'then_branch'", "type graph", "int"])
    n = helper.make_node("Constant", [], ["y"], name="const_none")
    write("constant_without_value.onnx", model([n], [], [fvi("y", [])]), "parse", ["node 'const_none'", "no value"])


def tensors():
    write("raw_data_short.onnx", add_model(raw_tensor("w", [2, 3], 20)), "parse",
          ["initializer 'w'", "24 bytes", "got 20"])
    write("raw_data_long.onnx", add_model(raw_tensor("w", [2, 3], 28)), "parse",
          ["initializer 'w'", "24 bytes", "got 28"])
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], [1.0] * 6)
    del w.float_data[5]
    write("float_data_count.onnx", add_model(w), "parse", ["initializer 'w'", "6 elements", "float_data holds 5"])
    s = helper.make_tensor("shape", TensorProto.INT64, [2], [3, 2])
    s.int64_data.append(1)
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")]
    write("int64_data_count.onnx", model(nodes, [X], [fvi("y", [3, 2])], [s]), "parse",
          ["initializer 'shape'", "2 elements", "int64_data holds 3"])
    t = helper.make_tensor("kv", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
    del t.float_data[2:]
    nodes = [helper.make_node("Constant", [], ["y"], name="const", value=t)]
    write("constant_data_count.onnx", model(nodes, [], [fvi("y", [4])]), "parse",
          ["node 'const'", "attribute 'value'", "4 elements", "float_data holds 2"])
    t = typed_tensor("names", TensorProto.STRING, [3], string_data=[b"a"])
    nodes = [helper.make_node("Identity", ["names"], ["y"], name="id")]
    write("string_data_count.onnx", model(nodes, [], [fvi("y", [3], TensorProto.STRING)], [t]), "parse",
          ["initializer 'names'", "string_data holds 1"])
    t = raw_tensor("q", [5], 2, INT4)
    nodes = [helper.make_node("Identity", ["q"], ["y"], name="id")]
    write("int4_raw_short.onnx", model(nodes, [], [fvi("y", [5], INT4)], [t], opset=21, ir_version=10),
          "parse", ["initializer 'q'", "3 bytes", "got 2"])
    write("negative_dim_initializer.onnx", add_model(raw_tensor("w", [-1, 3], 12)), "parse",
          ["initializer 'w'", "negative dimension -1"])
    t = raw_tensor("w", [2, 3], 24, 0)
    write("undefined_data_type.onnx", add_model(t), "parse", ["initializer 'w'", "unknown ONNX element type 0"])
    t = raw_tensor("", [2, 3], 24)
    write("initializer_without_name.onnx", add_model(t), "parse", ["initializer", "no name"])


def huge_claims():
    # 2^40 elements claimed with a few bytes of data: refused before anything is allocated.
    big = [1 << 20, 1 << 20]
    nodes = [helper.make_node("Add", ["x", "big"], ["y"], name="add")]
    write("huge_initializer_raw.onnx", model(nodes, [X], [Y], [raw_tensor("big", big, 16)]), "parse",
          ["initializer 'big'", "1099511627776 elements", "got 16"])
    t = typed_tensor("big", TensorProto.FLOAT, [1 << 40], float_data=[1.0])
    write("huge_initializer_float_data.onnx", model(nodes, [X], [Y], [t]), "parse",
          ["initializer 'big'", "1099511627776 elements", "float_data holds 1"])
    t = typed_tensor("big", TensorProto.STRING, [1 << 40], string_data=[b"x"])
    nodes_s = [helper.make_node("Identity", ["big"], ["y"], name="id")]
    write("huge_initializer_strings.onnx", model(nodes_s, [], [fvi("y", [1], TensorProto.STRING)], [t]), "parse",
          ["initializer 'big'", "string_data holds 1"])
    t = raw_tensor("big", [1 << 32, 1 << 32, 1 << 32], 4)
    write("overflowing_initializer.onnx", model(nodes, [X], [Y], [t]), "parse", ["initializer 'big'", "2^48"])
    t = typed_tensor("kv", TensorProto.FLOAT, big, float_data=[1.0])
    nodes_c = [helper.make_node("Constant", [], ["y"], name="const", value=t)]
    write("huge_constant.onnx", model(nodes_c, [], [fvi("y", big)]), "parse",
          ["node 'const'", "1099511627776 elements"])
    # A graph input claiming 2^40 elements is a valid declaration: it parses, compiles
    # without allocating it, and a run with a small input is refused.
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    write("huge_input.onnx", model(nodes, [fvi("x", big)], [fvi("y", big)]), "ok")
    # 2^40 elements made from a tiny constant: ConstantOfShape is a broadcast view; Neg
    # of it feeding Reshape's shape input asks the parser to fold 2^40 elements.
    shp = helper.make_tensor("shp", TensorProto.INT64, [2], big)
    nodes = [
        helper.make_node("ConstantOfShape", ["shp"], ["ones"], name="ones",
                         value=helper.make_tensor("one", TensorProto.INT64, [1], [1])),
        helper.make_node("Neg", ["ones"], ["minus"], name="neg"),
        helper.make_node("Reshape", ["x", "minus"], ["y"], name="reshape"),
    ]
    write("huge_fold.onnx", model(nodes, [X], [Y], [shp]), "any")


def opsets_and_ops():
    m = model([helper.make_node("Identity", ["x"], ["y"])], [X], [Y], opset=99)
    write("unknown_opset.onnx", m, "unsupported", ["opset 99"])
    m = model([helper.make_node("Identity", ["x"], ["y"])], [X], [Y], opset=0)
    write("opset_zero.onnx", m, "unsupported", ["opset 0"])
    m = model([helper.make_node("FooBar", ["x"], ["y"], name="mystery")], [X], [Y])
    write("unknown_operator.onnx", m, "unsupported", ["'FooBar'", "node 'mystery'", "opset 13"])
    m = model([helper.make_node("Gelu", ["x"], ["y"], name="custom", domain="com.example")], [X], [Y])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    write("unknown_domain.onnx", m, "unsupported", ["'Gelu'", "com.example", "node 'custom'"])


def subgraphs():
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    then_g = helper.make_graph([helper.make_node("Identity", ["ghost"], ["t"], name="inner_bad")], "then", [],
                               [fvi("t", [2, 3])])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="inner_ok")], "else", [],
                               [fvi("e", [2, 3])])
    n = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)
    write("if_undefined_in_branch.onnx", model([n], [X, cond], [Y]), "parse", ["node 'inner_bad'", "'ghost'"])
    bad = helper.make_node("LeakyRelu", ["x"], ["e"], name="inner_leaky")
    bad.attribute.append(helper.make_attribute("alpha", [1, 2]))
    else_g = helper.make_graph([bad], "else", [], [fvi("e", [2, 3])])
    then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"], name="inner_ok")], "then", [],
                               [fvi("t", [2, 3])])
    n = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)
    write("if_bad_attribute_in_branch.onnx", model([n], [X, cond], [Y]), "parse",
          ["node 'inner_leaky'", "attribute 'alpha'"])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [fvi("missing", [2, 3])])
    n = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)
    write("if_branch_output_missing.onnx", model([n], [X, cond], [Y]), "parse", ["node 'branch'", "'missing'"])
    # A Loop body with the wrong number of inputs.
    body = helper.make_graph([helper.make_node("Identity", ["i"], ["o"])], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, [])],
                             [helper.make_tensor_value_info("o", TensorProto.BOOL, [])])
    trip = helper.make_tensor("trip", TensorProto.INT64, [], [3])
    n = helper.make_node("Loop", ["trip", "", "x"], ["y"], name="loop", body=body)
    write("loop_body_inputs.onnx", model([n], [X], [Y], [trip]), "parse", ["node 'loop'", "body graph has 1 inputs"])
    # If nested past protobuf's recursion limit.
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [], [Y])
    inner = leaf
    for _ in range(80):
        n = helper.make_node("If", ["c"], ["y"], then_branch=inner, else_branch=leaf)
        inner = helper.make_graph([n], "g", [], [Y])
    write("nested_too_deep.onnx", model(list(inner.node), [X, cond], [Y]), "parse", ["not a valid ONNX model"])


def expansion():
    """Small models whose parse would expand exponentially without a bound."""
    # Loops nested 24 deep; each body doubles its carried value (Concat), so its shape
    # changes and the body is parsed again with a dynamic shape: 2^24 body parses.
    v = fvi("v", [1])
    body = helper.make_graph([helper.make_node("Concat", ["v", "v"], ["v_out"], axis=0),
                              helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("cond", TensorProto.BOOL, []), v],
                             [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), fvi("v_out", [None])])
    for _ in range(24):
        loop = helper.make_node("Loop", ["trip", "", "v"], ["v2"], body=body)
        body = helper.make_graph([loop, helper.make_node("Concat", ["v2", "v2"], ["v_out"], axis=0),
                                  helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
                                 [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                                  helper.make_tensor_value_info("cond", TensorProto.BOOL, []), v],
                                 [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
                                  fvi("v_out", [None])])
    trip = helper.make_tensor("trip", TensorProto.INT64, [], [1])
    n = helper.make_node("Loop", ["trip", "", "v"], ["y"], name="outer", body=body)
    # Since Loop bodies with a constant trip count are parsed once, this parses at once; it
    # stays in the corpus for the time limit (a re-parsing parser would hit the node budget).
    write("nested_loops_reparse.onnx", model([n], [v], [fvi("y", [None])], [trip]), "any")
    # Model-local functions, each calling the next twice: 2^24 calls.
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid("local", 1)]
    funcs = [helper.make_function("local", "F24", ["a"], ["b"], [helper.make_node("Identity", ["a"], ["b"])], opsets)]
    for i in range(23, -1, -1):
        nodes = [helper.make_node("F%d" % (i + 1), ["a"], ["t"], domain="local"),
                 helper.make_node("F%d" % (i + 1), ["t"], ["b"], domain="local")]
        funcs.append(helper.make_function("local", "F%d" % i, ["a"], ["b"], nodes, opsets))
    m = model([helper.make_node("F0", ["x"], ["y"], domain="local", name="call")], [X], [Y], functions=funcs)
    m.opset_import.append(helper.make_opsetid("local", 1))
    write("function_fan_out.onnx", m, "unsupported", ["expand too often"])


def external_data():
    with open(os.path.join(HERE, "external_small.bin"), "wb") as f:
        f.write(bytes(range(16)))

    def ext(name, **kv):
        t = typed_tensor("w", TensorProto.FLOAT, [2, 3])
        t.data_location = TensorProto.EXTERNAL
        for k, v in kv.items():
            e = t.external_data.add()
            e.key, e.value = k, v
        write(name, add_model(t), *EXT[name])

    EXT = {
        "external_outside.onnx": ("parse", ["initializer 'w'", "'../outside.bin'", "inside the model's folder"]),
        "external_absolute.onnx": ("parse", ["initializer 'w'", "inside the model's folder"]),
        "external_missing.onnx": ("io", ["initializer 'w'", "no_such_weights.bin"]),
        "external_range.onnx": ("parse", ["initializer 'w'", "outside", "16 bytes"]),
        "external_bad_offset.onnx": ("parse", ["initializer 'w'", "offset", "'twelve'"]),
        "external_overflow.onnx": ("parse", ["initializer 'w'", "outside"]),
        "external_no_location.onnx": ("parse", ["initializer 'w'", "without a location"]),
        "external_directory.onnx": ("io", ["initializer 'w'", "not a regular file"]),
        # The unit test also runs this one next to a FIFO named weights.fifo (no hang).
        "external_fifo.onnx": ("io", ["initializer 'w'", "weights.fifo"]),
    }
    ext("external_outside.onnx", location="../outside.bin")
    ext("external_absolute.onnx", location="/etc/passwd")
    ext("external_missing.onnx", location="no_such_weights.bin")
    ext("external_range.onnx", location="external_small.bin", offset="8", length="24")
    ext("external_bad_offset.onnx", location="external_small.bin", offset="twelve")
    ext("external_overflow.onnx", location="external_small.bin", offset="9223372036854775807", length="24")
    ext("external_no_location.onnx", offset="0")
    ext("external_directory.onnx", location=".")
    ext("external_fifo.onnx", location="weights.fifo")


def wire_level():
    """Length prefixes that claim far more than the file holds."""
    head = field(1, 0, 8) + field(8, 2, field(2, 0, 13))  # ir_version, opset_import {version 13}
    # graph { initializer { dims 4, data_type FLOAT, float_data (packed) claiming 2^31-1 bytes } }
    tensor = field(1, 0, 4) + field(2, 0, 1) + lying_length(4, (1 << 31) - 1, b"\0" * 16)
    write("huge_packed_count.onnx", head + field(7, 2, field(5, 2, tensor)), "parse", ["not a valid ONNX model"])
    # raw_data (field 9) claiming 1 GiB.
    tensor = field(1, 0, 4) + field(2, 0, 1) + lying_length(9, 1 << 30, b"\0" * 16)
    write("huge_raw_length.onnx", head + field(7, 2, field(5, 2, tensor)), "parse", ["not a valid ONNX model"])
    # The graph itself claiming 2^62 bytes (a 9-byte varint).
    write("huge_graph_length.onnx", head + lying_length(7, 1 << 62, b"\0" * 8), "parse", ["not a valid ONNX model"])
    # A 64-dimension initializer of 2s (2^64 elements): counted without overflow.
    t = raw_tensor("big", [2] * 64, 4)
    nodes = [helper.make_node("Identity", ["big"], ["y"], name="id")]
    write("many_dims_initializer.onnx", model(nodes, [], [fvi("y", [2] * 64)], [t]), "parse",
          ["initializer 'big'", "2^48"])


def main():
    if os.path.isdir(HERE):
        shutil.rmtree(HERE)
    os.makedirs(HERE)
    truncations_and_flips()
    not_models()
    graph_structure()
    attributes()
    tensors()
    huge_claims()
    opsets_and_ops()
    subgraphs()
    expansion()
    external_data()
    wire_level()
    with open(os.path.join(HERE, "expected.tsv"), "w") as f:
        f.write("# file\toutcome\tneedles (|-separated); written by tests/data/make_bad_models.py\n")
        for name, outcome, needles in CASES:
            f.write("%s\t%s\t%s\n" % (name, outcome, "|".join(needles)))
    total = sum(os.path.getsize(os.path.join(HERE, n)) for n in os.listdir(HERE))
    print("%d cases, %d bytes" % (len(CASES), total))


if __name__ == "__main__":
    main()

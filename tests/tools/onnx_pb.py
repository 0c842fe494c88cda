"""Just enough of the protobuf wire format to read and write ONNX TensorProto files and to
build tiny ModelProto files, written from the ONNX .proto field numbers.

The tool tests use this instead of Kiln's own reader/writer so that `kiln run --output` is
checked against an independent decoder, and so that they need no `onnx` Python package.
"""
import struct

import numpy as np

# TensorProto.DataType values (onnx.proto).
FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, STRING, BOOL, FLOAT16, DOUBLE, UINT32, UINT64 = (
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13)
BFLOAT16 = 16

# Element type -> NumPy dtype of its raw_data bytes (bfloat16 is kept as its uint16 bits).
NP_OF = {FLOAT: np.float32, UINT8: np.uint8, INT8: np.int8, UINT16: np.uint16, INT16: np.int16, INT32: np.int32,
         INT64: np.int64, BOOL: np.bool_, FLOAT16: np.float16, DOUBLE: np.float64, UINT32: np.uint32,
         UINT64: np.uint64, BFLOAT16: np.uint16}
ONNX_OF = {np.dtype(v): k for k, v in NP_OF.items() if k != BFLOAT16}


# ---------------------------------------------------------------- wire format
def _varint(n):
    n &= (1 << 64) - 1  # negative int64 values are written as 10-byte two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field, wire):
    return _varint(field << 3 | wire)


def f_varint(field, n):
    return _key(field, 0) + _varint(n)


def f_bytes(field, data):
    if isinstance(data, str):
        data = data.encode()
    return _key(field, 2) + _varint(len(data)) + data


def _read_varint(buf, i):
    shift = n = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def fields(buf):
    """Yields (field number, wire type, value) of one message; value is an int or bytes."""
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _read_varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = _read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield field, wire, v


def _signed64(n):
    return n - (1 << 64) if n >= 1 << 63 else n


# ---------------------------------------------------------------- TensorProto
def encode_tensor(array, name="", data_type=None):
    """A TensorProto with raw_data. data_type overrides the element type (BFLOAT16 for uint16 bits)."""
    a = np.ascontiguousarray(array)
    dt = data_type if data_type is not None else ONNX_OF[a.dtype]
    out = b"".join(f_varint(1, d) for d in a.shape) + f_varint(2, dt)
    if name:
        out += f_bytes(8, name)
    return out + f_bytes(9, a.astype(a.dtype.newbyteorder("<")).tobytes())


def write_tensor(path, array, name="", data_type=None):
    with open(path, "wb") as f:
        f.write(encode_tensor(array, name, data_type))


def decode_tensor(buf):
    """Returns (name, data_type, numpy array) of a TensorProto (raw_data or the typed fields)."""
    dims, dt, name, raw = [], FLOAT, "", None
    typed = {4: [], 5: [], 7: [], 10: [], 11: []}
    for field, wire, v in fields(buf):
        if field == 1:
            if wire == 2:  # packed
                j = 0
                while j < len(v):
                    d, j = _read_varint(v, j)
                    dims.append(d)
            else:
                dims.append(v)
        elif field == 2:
            dt = v
        elif field == 8:
            name = v.decode()
        elif field == 9:
            raw = bytes(v)
        elif field in typed:
            if field == 4:
                typed[4] += struct.unpack(f"<{len(v) // 4}f", v) if wire == 2 else struct.unpack("<f", v)
            elif field == 10:
                typed[10] += struct.unpack(f"<{len(v) // 8}d", v) if wire == 2 else struct.unpack("<d", v)
            elif wire == 2:
                j = 0
                while j < len(v):
                    d, j = _read_varint(v, j)
                    typed[field].append(d)
            else:
                typed[field].append(v)
    if dt == STRING:
        raise ValueError("string tensors are not needed by these tests")
    np_t = np.dtype(NP_OF[dt])
    if raw is not None:
        a = np.frombuffer(raw, dtype=np_t.newbyteorder("<")).astype(np_t)
    elif dt == FLOAT:
        a = np.array(typed[4], dtype=np_t)
    elif dt == DOUBLE:
        a = np.array(typed[10], dtype=np_t)
    elif dt == INT64:
        a = np.array([_signed64(x) for x in typed[7]], dtype=np_t)
    elif dt in (UINT32, UINT64):
        a = np.array(typed[11], dtype=np_t)
    else:  # int32_data holds the small ints, bool and the 16-bit float bit patterns
        vals = typed[5]
        if dt in (FLOAT16, BFLOAT16, UINT16):
            a = np.array(vals, dtype=np.uint16).view(np_t)
        else:
            a = np.array([x - (1 << 64) if x >= 1 << 63 else x for x in vals]).astype(np_t)
    return name, dt, a.reshape(dims)


def read_tensor(path):
    with open(path, "rb") as f:
        return decode_tensor(f.read())


# ---------------------------------------------------------------- ModelProto
def value_info(name, elem_type, dims):
    dim_msgs = b"".join(f_bytes(1, f_varint(1, d) if isinstance(d, int) else f_bytes(2, d)) for d in dims)
    tensor_type = f_varint(1, elem_type) + f_bytes(2, dim_msgs)
    return f_bytes(1, name) + f_bytes(2, f_bytes(1, tensor_type))


def attr_graph(name, graph_msg):
    """An AttributeProto holding a graph (type GRAPH = 5), e.g. a Loop's body."""
    return f_bytes(1, name) + f_bytes(6, graph_msg) + f_varint(20, 5)


def node(op_type, inputs, outputs, name="", domain="", attributes=()):
    out = b"".join(f_bytes(1, i) for i in inputs) + b"".join(f_bytes(2, o) for o in outputs)
    if name:
        out += f_bytes(3, name)
    out += f_bytes(4, op_type)
    out += b"".join(f_bytes(5, a) for a in attributes)
    if domain:
        out += f_bytes(7, domain)
    return out


def graph(nodes, inputs, outputs, name="g", initializers=()):
    """inputs/outputs: (name, elem_type, dims); nodes: node(...) messages; initializers: (name, array)."""
    out = b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, name)
    out += b"".join(f_bytes(5, encode_tensor(a, n)) for n, a in initializers)
    out += b"".join(f_bytes(11, value_info(*i)) for i in inputs)
    out += b"".join(f_bytes(12, value_info(*o)) for o in outputs)
    return out


def model(nodes, inputs, outputs, opset=13, graph_name="g", initializers=()):
    g = graph(nodes, inputs, outputs, graph_name, initializers)
    return f_varint(1, 8) + f_bytes(2, "kiln-tool-tests") + f_bytes(7, g) + f_bytes(8, f_bytes(1, "") + f_varint(2, opset))


# ---------------------------------------------------------------- SequenceProto / OptionalProto
def decode_sequence(buf):
    """A SequenceProto of tensors as a list of (name, data_type, array)."""
    items = []
    for field, _, v in fields(buf):
        if field == 3:  # tensor_values
            items.append(decode_tensor(v))
        elif field in (4, 5, 6, 7):
            raise ValueError(f"SequenceProto field {field} (not tensors) is not supported here")
    return items


def decode_optional(buf):
    """An OptionalProto: None when empty, else ("tensor", (name, data_type, array)) or
    ("sequence", [...])."""
    for field, _, v in fields(buf):
        if field == 3:
            return ("tensor", decode_tensor(v))
        if field == 5:
            return ("sequence", decode_sequence(v))
        if field in (4, 6, 7):
            raise ValueError(f"OptionalProto field {field} is not supported here")
    return None

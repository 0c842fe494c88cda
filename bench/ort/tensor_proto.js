'use strict';
// Just enough protobuf to read and write serialized onnx.TensorProto messages (the input_K.pb and
// output_K.pb files of the ONNX backend-test layout) without a protobuf dependency.
//
// Reading understands dims, data_type, name, raw_data and the typed repeated fields
// (float_data, int32_data, string_data, int64_data, double_data, uint64_data), packed or not.
// Writing emits dims, data_type, name and raw_data (string tensors: string_data), in field-number
// order, which is byte for byte what onnx.numpy_helper.from_array produces for numeric tensors.
//
// Tensors are plain objects { name, type, dims, data } where `type` is an onnxruntime-node type
// name ('float32', 'int64', ...), `dims` an array of Numbers and `data` a TypedArray (BigInt64Array
// for int64, an Array of strings for 'string'), i.e. exactly what `new ort.Tensor(type, data, dims)`
// takes.
const fs = require('fs');
const path = require('path');

// TensorProto field numbers (onnx.proto3).
const F_DIMS = 1;
const F_DATA_TYPE = 2;
const F_FLOAT_DATA = 4;
const F_INT32_DATA = 5;
const F_STRING_DATA = 6;
const F_INT64_DATA = 7;
const F_NAME = 8;
const F_RAW_DATA = 9;
const F_DOUBLE_DATA = 10;
const F_UINT64_DATA = 11;

// Wire types.
const WT_VARINT = 0;
const WT_I64 = 1;
const WT_LEN = 2;
const WT_I32 = 5;

// ONNX data_type code -> element description. `typed` is the TypedArray ORT wants; `typedField`
// says which repeated field holds the values when raw_data is absent (per onnx.proto's comments:
// the small integer types, bool and float16 live in int32_data as widened values).
const ELEMENT_TYPES = [
  { code: 1, ort: 'float32', typed: Float32Array, typedField: F_FLOAT_DATA },
  { code: 2, ort: 'uint8', typed: Uint8Array, typedField: F_INT32_DATA },
  { code: 3, ort: 'int8', typed: Int8Array, typedField: F_INT32_DATA },
  { code: 4, ort: 'uint16', typed: Uint16Array, typedField: F_INT32_DATA },
  { code: 5, ort: 'int16', typed: Int16Array, typedField: F_INT32_DATA },
  { code: 6, ort: 'int32', typed: Int32Array, typedField: F_INT32_DATA },
  { code: 7, ort: 'int64', typed: BigInt64Array, typedField: F_INT64_DATA },
  { code: 8, ort: 'string', typed: null, typedField: F_STRING_DATA },
  { code: 9, ort: 'bool', typed: Uint8Array, typedField: F_INT32_DATA },
  { code: 10, ort: 'float16', typed: Uint16Array, typedField: F_INT32_DATA },
  { code: 11, ort: 'float64', typed: Float64Array, typedField: F_DOUBLE_DATA },
  { code: 12, ort: 'uint32', typed: Uint32Array, typedField: F_UINT64_DATA },
  { code: 13, ort: 'uint64', typed: BigUint64Array, typedField: F_UINT64_DATA },
];
const BY_CODE = new Map(ELEMENT_TYPES.map((e) => [e.code, e]));
const BY_ORT = new Map(ELEMENT_TYPES.map((e) => [e.ort, e]));

// ---------------------------------------------------------------------------------------------
// Decoding

class Reader {
  constructor(buf, start = 0, end = buf.length) {
    this.buf = buf;
    this.pos = start;
    this.end = end;
  }

  done() {
    return this.pos >= this.end;
  }

  // Varints are read as BigInt: int64 dims and values can exceed 2^53.
  varint() {
    let value = 0n;
    let shift = 0n;
    for (;;) {
      if (this.pos >= this.end) throw new Error('TensorProto: truncated varint');
      const byte = this.buf[this.pos++];
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return value;
      shift += 7n;
      if (shift > 63n) throw new Error('TensorProto: varint longer than 10 bytes');
    }
  }

  bytes(n) {
    if (this.pos + n > this.end) throw new Error('TensorProto: field runs past the end of the message');
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  skip(wireType) {
    if (wireType === WT_VARINT) this.varint();
    else if (wireType === WT_I64) this.bytes(8);
    else if (wireType === WT_I32) this.bytes(4);
    else if (wireType === WT_LEN) this.bytes(Number(this.varint()));
    else throw new Error(`TensorProto: unsupported wire type ${wireType}`);
  }
}

// Collects the scalar values of a repeated numeric field, accepting the packed form (one
// length-delimited blob) and the unpacked form (one tag per value) alike.
function readRepeated(reader, wireType, scalarWireType, out) {
  const readOne = (r) => {
    if (scalarWireType === WT_VARINT) return r.varint();
    if (scalarWireType === WT_I32) return r.bytes(4);
    return r.bytes(8);
  };
  if (wireType === WT_LEN) {
    const n = Number(reader.varint());
    const sub = new Reader(reader.buf, reader.pos, reader.pos + n);
    while (!sub.done()) out.push(readOne(sub));
    reader.pos += n;
  } else if (wireType === scalarWireType) {
    out.push(readOne(reader));
  } else {
    throw new Error(`TensorProto: wire type ${wireType} where ${scalarWireType} was expected`);
  }
}

function elementCount(dims) {
  return dims.reduce((a, b) => a * b, 1);
}

// Copies little-endian bytes into a fresh, aligned TypedArray (Buffer slices may be unaligned).
function typedFromBytes(Typed, bytes) {
  const copy = new Uint8Array(bytes.length);
  copy.set(bytes);
  return new Typed(copy.buffer, 0, bytes.length / Typed.BYTES_PER_ELEMENT);
}

function typedFromFields(elem, fields) {
  const Typed = elem.typed;
  const f = elem.typedField;
  if (f === F_FLOAT_DATA) {
    const out = new Float32Array(fields.length);
    fields.forEach((b, i) => { out[i] = Buffer.from(b).readFloatLE(0); });
    return out;
  }
  if (f === F_DOUBLE_DATA) {
    const out = new Float64Array(fields.length);
    fields.forEach((b, i) => { out[i] = Buffer.from(b).readDoubleLE(0); });
    return out;
  }
  if (f === F_INT64_DATA) return BigInt64Array.from(fields, (v) => BigInt.asIntN(64, v));
  if (f === F_UINT64_DATA) {
    if (Typed === BigUint64Array) return BigUint64Array.from(fields, (v) => BigInt.asUintN(64, v));
    return Typed.from(fields, (v) => Number(BigInt.asUintN(32, v)));
  }
  // int32_data: negative int32 values are sign-extended to 64 bits on the wire.
  return Typed.from(fields, (v) => Number(BigInt.asIntN(32, v)));
}

function decodeTensor(buf) {
  const r = new Reader(buf);
  const dims = [];
  let code = 0;
  let name = '';
  let raw = null;
  const typed = new Map(); // field number -> values
  const strings = [];
  while (!r.done()) {
    const key = Number(r.varint());
    const field = key >>> 3;
    const wt = key & 7;
    if (field === F_DIMS) {
      const vals = [];
      readRepeated(r, wt, WT_VARINT, vals);
      for (const v of vals) dims.push(Number(BigInt.asIntN(64, v)));
    } else if (field === F_DATA_TYPE && wt === WT_VARINT) {
      code = Number(r.varint());
    } else if (field === F_NAME && wt === WT_LEN) {
      name = r.bytes(Number(r.varint())).toString('utf8');
    } else if (field === F_RAW_DATA && wt === WT_LEN) {
      raw = r.bytes(Number(r.varint()));
    } else if (field === F_STRING_DATA && wt === WT_LEN) {
      strings.push(r.bytes(Number(r.varint())).toString('utf8'));
    } else if (field === F_FLOAT_DATA || field === F_DOUBLE_DATA || field === F_INT32_DATA
               || field === F_INT64_DATA || field === F_UINT64_DATA) {
      const scalarWt = field === F_FLOAT_DATA ? WT_I32 : field === F_DOUBLE_DATA ? WT_I64 : WT_VARINT;
      if (!typed.has(field)) typed.set(field, []);
      readRepeated(r, wt, scalarWt, typed.get(field));
    } else {
      r.skip(wt); // segment, doc_string, external_data, ...: not used by test data files
    }
  }
  const elem = BY_CODE.get(code);
  if (!elem) throw new Error(`TensorProto '${name}': unsupported data_type ${code}`);
  const count = elementCount(dims);
  let data;
  if (elem.ort === 'string') {
    data = strings;
  } else if (raw !== null) {
    const want = count * elem.typed.BYTES_PER_ELEMENT;
    if (raw.length !== want) {
      throw new Error(`TensorProto '${name}': raw_data has ${raw.length} bytes, dims [${dims}] of ${elem.ort} need ${want}`);
    }
    data = typedFromBytes(elem.typed, raw);
  } else {
    data = typedFromFields(elem, typed.get(elem.typedField) || []);
  }
  if (data.length !== count) {
    throw new Error(`TensorProto '${name}': ${data.length} values, dims [${dims}] need ${count}`);
  }
  return { name, type: elem.ort, dims, data };
}

// ---------------------------------------------------------------------------------------------
// Encoding

function varintBytes(value) {
  let v = BigInt.asUintN(64, BigInt(value)); // negative values: 10-byte two's complement form
  const out = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v !== 0n) byte |= 0x80;
    out.push(byte);
  } while (v !== 0n);
  return Buffer.from(out);
}

function tag(field, wireType) {
  return varintBytes((field << 3) | wireType);
}

function lengthDelimited(field, payload) {
  return [tag(field, WT_LEN), varintBytes(payload.length), payload];
}

// `tensor` is { name, type, dims, data }; an onnxruntime-node Tensor has all four too.
function encodeTensor(tensor) {
  const elem = BY_ORT.get(tensor.type);
  if (!elem) throw new Error(`encodeTensor '${tensor.name}': unsupported type ${tensor.type}`);
  const dims = Array.from(tensor.dims, Number);
  const parts = [];
  // onnx.proto is proto2, where repeated scalars are unpacked unless declared otherwise:
  // one tag per dimension, as the onnx Python package writes them.
  for (const d of dims) parts.push(tag(F_DIMS, WT_VARINT), varintBytes(d));
  parts.push(tag(F_DATA_TYPE, WT_VARINT), varintBytes(elem.code));
  if (tensor.name) parts.push(...lengthDelimited(F_NAME, Buffer.from(tensor.name, 'utf8')));
  if (elem.ort === 'string') {
    for (const s of tensor.data) parts.push(...lengthDelimited(F_STRING_DATA, Buffer.from(String(s), 'utf8')));
  } else {
    const d = tensor.data;
    const bytes = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
    parts.push(...lengthDelimited(F_RAW_DATA, bytes));
  }
  return Buffer.concat(parts);
}

// ---------------------------------------------------------------------------------------------
// Files

// The `<prefix>_K.pb` files of a test data folder, ordered by K (numerically: input_10 after input_9).
function listTensorFiles(dir, prefix) {
  const re = new RegExp(`^${prefix}_(\\d+)\\.pb$`);
  return fs.readdirSync(dir)
    .map((f) => [f, re.exec(f)])
    .filter(([, m]) => m)
    .sort((a, b) => Number(a[1][1]) - Number(b[1][1]))
    .map(([f]) => path.join(dir, f));
}

function readTensorFile(file) {
  return decodeTensor(fs.readFileSync(file));
}

function writeTensorFile(file, tensor) {
  fs.writeFileSync(file, encodeTensor(tensor));
}

module.exports = {
  decodeTensor,
  encodeTensor,
  listTensorFiles,
  readTensorFile,
  writeTensorFile,
  ELEMENT_TYPES,
};

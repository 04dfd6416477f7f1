'use strict';
// Minimal protobuf reader and writer for the few ONNX messages the peer benchmark needs.
//
// Only what is used here is decoded: ModelProto.graph, GraphProto.{node, initializer, input, output, value_info},
// NodeProto.{input, output, op_type, attribute}, AttributeProto.{name, i}, ValueInfoProto shapes and
// TensorProto.{dims, data_type, float_data, int64_data, name, raw_data}. Everything else is skipped by wire type.
// Field numbers are those of onnx/onnx.proto3.
//
//   wire types: 0 varint, 1 fixed64, 2 length-delimited (bytes, strings, messages, packed arrays), 5 fixed32

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_LEN = 2;
const WIRE_FIXED32 = 5;

// TensorProto.DataType values this benchmark reads or writes.
const DataType = { FLOAT: 1, INT32: 6, INT64: 7 };

// Reads one varint at buf[pos]; returns [value as a signed 64-bit Number, next position].
// int64 fields encode negatives as 10-byte two's complement varints, hence BigInt.asIntN.
function readVarint(buf, pos) {
  let result = 0n;
  let shift = 0n;
  for (;;) {
    if (pos >= buf.length) throw new Error('truncated varint');
    const byte = buf[pos++];
    result |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) break;
    shift += 7n;
  }
  return [Number(BigInt.asIntN(64, result)), pos];
}

// Yields {field, wire, value} for every field of one message. A length-delimited value is a subarray of buf (no
// copy); a varint is a Number; fixed32/fixed64 are the raw bytes.
function* fields(buf) {
  let pos = 0;
  while (pos < buf.length) {
    let key;
    [key, pos] = readVarint(buf, pos);
    const field = Math.floor(key / 8);
    const wire = key & 7;
    let value;
    if (wire === WIRE_VARINT) {
      [value, pos] = readVarint(buf, pos);
    } else if (wire === WIRE_LEN) {
      let len;
      [len, pos] = readVarint(buf, pos);
      value = buf.subarray(pos, pos + len);
      pos += len;
    } else if (wire === WIRE_FIXED64 || wire === WIRE_FIXED32) {
      const len = wire === WIRE_FIXED64 ? 8 : 4;
      value = buf.subarray(pos, pos + len);
      pos += len;
    } else {
      throw new Error(`unsupported wire type ${wire} (field ${field})`);
    }
    if (pos > buf.length) throw new Error(`truncated field ${field}`);
    yield { field, wire, value };
  }
}

// A repeated integer field arrives either packed (one length-delimited run of varints) or one varint per entry.
function pushVarints(out, f) {
  if (f.wire === WIRE_VARINT) {
    out.push(f.value);
    return;
  }
  for (let pos = 0; pos < f.value.length;) {
    let v;
    [v, pos] = readVarint(f.value, pos);
    out.push(v);
  }
}

const utf8 = (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('utf8');

// TensorProto -> {name, dims, dataType, data: Float32Array | Int32Array | BigInt64Array}.
function decodeTensor(buf) {
  const t = { name: '', dims: [], dataType: 0, raw: null, floats: [], ints: [] };
  for (const f of fields(buf)) {
    switch (f.field) {
      case 1: pushVarints(t.dims, f); break;                        // dims
      case 2: t.dataType = f.value; break;                          // data_type
      case 4:                                                       // float_data: packed, or one fixed32
        for (const v of new Float32Array(copyAligned(f.value))) t.floats.push(v);
        break;
      case 5: pushVarints(t.ints, f); break;                        // int32_data
      case 7: pushVarints(t.ints, f); break;                        // int64_data
      case 8: t.name = utf8(f.value); break;                        // name
      case 9: t.raw = f.value; break;                               // raw_data
      default: break;
    }
  }
  const numel = t.dims.reduce((a, b) => a * b, 1);
  let data;
  if (t.dataType === DataType.FLOAT) {
    data = t.raw ? new Float32Array(copyAligned(t.raw)) : Float32Array.from(t.floats);
  } else if (t.dataType === DataType.INT64) {
    data = t.raw ? new BigInt64Array(copyAligned(t.raw)) : BigInt64Array.from(t.ints, BigInt);
  } else if (t.dataType === DataType.INT32) {
    data = t.raw ? new Int32Array(copyAligned(t.raw)) : Int32Array.from(t.ints);
  } else {
    throw new Error(`tensor '${t.name}': data_type ${t.dataType} not supported (float, int32, int64 are)`);
  }
  if (data.length !== numel) throw new Error(`tensor '${t.name}': ${data.length} values for dims [${t.dims}]`);
  return { name: t.name, dims: t.dims, dataType: t.dataType, data };
}

// Typed arrays need an aligned, owned buffer; raw_data is an arbitrary subarray of the file.
function copyAligned(bytes) {
  const out = new ArrayBuffer(bytes.length);
  new Uint8Array(out).set(bytes);
  return out;
}

// TensorShapeProto of a ValueInfoProto -> array of dims (a Number, or null when symbolic/unknown), or null when the
// value carries no tensor shape.
function decodeValueInfo(buf) {
  let name = '';
  let dims = null;
  for (const f of fields(buf)) {
    if (f.field === 1) name = utf8(f.value);
    if (f.field !== 2) continue;                                    // type: TypeProto
    for (const tf of fields(f.value)) {
      if (tf.field !== 1) continue;                                 // tensor_type: TypeProto.Tensor
      for (const tt of fields(tf.value)) {
        if (tt.field !== 2) continue;                               // shape: TensorShapeProto
        dims = [];
        for (const d of fields(tt.value)) {
          if (d.field !== 1) continue;                              // dim: Dimension
          let v = null;
          for (const df of fields(d.value)) if (df.field === 1) v = df.value;  // dim_value (dim_param stays null)
          dims.push(v);
        }
      }
    }
  }
  return { name, dims };
}

function decodeNode(buf) {
  const node = { inputs: [], outputs: [], name: '', opType: '', attrs: {} };
  for (const f of fields(buf)) {
    switch (f.field) {
      case 1: node.inputs.push(utf8(f.value)); break;
      case 2: node.outputs.push(utf8(f.value)); break;
      case 3: node.name = utf8(f.value); break;
      case 4: node.opType = utf8(f.value); break;
      case 5: {                                                     // attribute: only integer ones are kept
        let name = '';
        let i = null;
        for (const af of fields(f.value)) {
          if (af.field === 1) name = utf8(af.value);
          if (af.field === 3) i = af.value;
        }
        if (i !== null) node.attrs[name] = i;
        break;
      }
      default: break;
    }
  }
  return node;
}

// ModelProto -> {nodes, shapes: Map name -> dims, inputs, outputs}. Shapes come from graph inputs, outputs,
// value_info and initializer dims. Initializer contents are not decoded (only their dims), so large models stay cheap.
function decodeModel(buf) {
  const model = { nodes: [], shapes: new Map(), inputs: [], outputs: [] };
  for (const f of fields(buf)) {
    if (f.field !== 7) continue;                                    // graph
    for (const g of fields(f.value)) {
      switch (g.field) {
        case 1: model.nodes.push(decodeNode(g.value)); break;      // node
        case 5: {                                                   // initializer
          let name = '';
          const dims = [];
          for (const tf of fields(g.value)) {
            if (tf.field === 1) pushVarints(dims, tf);
            if (tf.field === 8) name = utf8(tf.value);
          }
          model.shapes.set(name, dims);
          break;
        }
        case 11: case 12: case 13: {                                // input, output, value_info
          const vi = decodeValueInfo(g.value);
          if (vi.dims) model.shapes.set(vi.name, vi.dims);
          if (g.field === 11) model.inputs.push(vi.name);
          if (g.field === 12) model.outputs.push(vi.name);
          break;
        }
        default: break;
      }
    }
  }
  return model;
}

// Number of top-level nodes of a ModelProto, without decoding them.
function countNodes(buf) {
  let n = 0;
  for (const f of fields(buf)) {
    if (f.field !== 7) continue;
    for (const g of fields(f.value)) if (g.field === 1) n++;
  }
  return n;
}

// ---- writer ---------------------------------------------------------------------------------------------------

function varint(value) {
  let v = BigInt.asUintN(64, BigInt(value));
  const out = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v !== 0n) byte |= 0x80;
    out.push(byte);
  } while (v !== 0n);
  return Buffer.from(out);
}

// Encoders for one field each; a message is Buffer.concat of its fields.
const intField = (field, value) => Buffer.concat([varint(field * 8 + WIRE_VARINT), varint(value)]);
const bytesField = (field, bytes) => Buffer.concat([varint(field * 8 + WIRE_LEN), varint(bytes.length), bytes]);
const stringField = (field, s) => bytesField(field, Buffer.from(s, 'utf8'));

// Float32 TensorProto with raw_data.
function encodeFloatTensor(name, dims, values) {
  const raw = Buffer.from(values.buffer, values.byteOffset, values.byteLength);
  return Buffer.concat([...dims.map((d) => intField(1, d)), intField(2, DataType.FLOAT), stringField(8, name),
                        bytesField(9, raw)]);
}

// ValueInfoProto of a float tensor with a static shape.
function encodeValueInfo(name, dims) {
  const shape = Buffer.concat(dims.map((d) => bytesField(1, intField(1, d))));
  const tensorType = Buffer.concat([intField(1, DataType.FLOAT), bytesField(2, shape)]);
  return Buffer.concat([stringField(1, name), bytesField(2, bytesField(1, tensorType))]);
}

module.exports = { DataType, fields, decodeTensor, decodeModel, countNodes, intField, bytesField, stringField,
                   encodeFloatTensor, encodeValueInfo };

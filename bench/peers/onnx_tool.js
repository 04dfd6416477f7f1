'use strict';
// Small ONNX helpers for the peer benchmark driver (run.sh).
//
//   node onnx_tool.js matmul-model DIR [--size S]   writes DIR/model.onnx (Y = X·W, X and W [S,S] float32, W an
//                                                   initializer) and DIR/input_0.pb; prints {"flops": 2·S³}
//   node onnx_tool.js flops MODEL                   MatMul/Gemm/Conv flops of a model whose values all carry static
//                                                   shapes (graph-autofusion --output writes value_info for each);
//                                                   prints {"flops", "counted", "unknown"}
//   node onnx_tool.js raw-to-pb RAW OUT --dims D,D  wraps raw little-endian float32 values in a TensorProto file,
//                                                   so `graph-autofusion compare` can check ORT's output

const fs = require('fs');
const path = require('path');
const proto = require('./proto');

// Deterministic values in [-1, 1) (a 32-bit LCG): the GEMM timing must not depend on a random seed or denormals.
function lcgValues(n, seed) {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2 ** 31 - 1;
  }
  return out;
}

function matmulModel(dir, size) {
  const dims = [size, size];
  const node = Buffer.concat([proto.stringField(1, 'X'), proto.stringField(1, 'W'), proto.stringField(2, 'Y'),
                              proto.stringField(3, 'matmul'), proto.stringField(4, 'MatMul')]);
  const graph = Buffer.concat([
    proto.bytesField(1, node),                                                      // node
    proto.stringField(2, `matmul_${size}`),                                         // name
    proto.bytesField(5, proto.encodeFloatTensor('W', dims, lcgValues(size * size, 2))),  // initializer
    proto.bytesField(11, proto.encodeValueInfo('X', dims)),                         // input
    proto.bytesField(12, proto.encodeValueInfo('Y', dims)),                         // output
  ]);
  const opset = Buffer.concat([proto.stringField(1, ''), proto.intField(2, 13)]);  // default domain, opset 13
  const model = Buffer.concat([
    proto.intField(1, 8),                                                           // ir_version
    proto.stringField(2, 'graph-autofusion bench/peers'),                           // producer_name
    proto.bytesField(7, graph),                                                     // graph
    proto.bytesField(8, opset),                                                     // opset_import
  ]);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'model.onnx'), model);
  fs.writeFileSync(path.join(dir, 'input_0.pb'), proto.encodeFloatTensor('X', dims, lcgValues(size * size, 1)));
  return { flops: 2 * size ** 3 };
}

const product = (dims) => dims.reduce((a, b) => a * b, 1);

// Multiply-adds count 2 flops; bias and epilogue elementwise work is ignored (small next to the products).
//   MatMul  Y[..., M, N] = A[..., M, K] · B[..., K, N]          2 · |Y| · K
//   Gemm    Y[M, N] = op(A) · op(B) (+ C), op(A) = [M, K]       2 · |Y| · K, K = A.dims[transA ? 0 : 1]
//   Conv    Y[N, M, ...] from W[M, C/group, k...]               2 · |Y| · C/group · Πk
function nodeFlops(node, shapes) {
  const y = shapes.get(node.outputs[0]);
  const a = shapes.get(node.inputs[0]);
  const w = shapes.get(node.inputs[1]);
  const known = (d) => d && d.every((v) => v !== null);
  if (!known(y) || !known(a) || !known(w)) return null;
  switch (node.opType) {
    case 'MatMul': return 2 * product(y) * a[a.length - 1];
    case 'Gemm': return 2 * product(y) * a[node.attrs.transA ? 0 : 1];
    case 'Conv': return 2 * product(y) * product(w.slice(1));
    default: return 0;
  }
}

function modelFlops(file) {
  const model = proto.decodeModel(fs.readFileSync(file));
  const result = { flops: 0, counted: {}, unknown: [] };
  for (const node of model.nodes) {
    if (!['MatMul', 'Gemm', 'Conv'].includes(node.opType)) continue;
    const f = nodeFlops(node, model.shapes);
    if (f === null) {
      result.unknown.push(node.name || node.outputs[0]);
      continue;
    }
    result.flops += f;
    result.counted[node.opType] = (result.counted[node.opType] || 0) + 1;
  }
  return result;
}

function rawToPb(rawFile, outFile, dims) {
  const raw = fs.readFileSync(rawFile);
  const values = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length));
  if (values.length !== product(dims)) {
    throw new Error(`${rawFile}: ${values.length} float32 values, dims [${dims}] need ${product(dims)}`);
  }
  fs.writeFileSync(outFile, proto.encodeFloatTensor('output', dims, values));
  return { values: values.length };
}

function main(argv) {
  const [cmd, ...rest] = argv;
  const option = (name, fallback) => {
    const i = rest.indexOf(name);
    if (i < 0) return fallback;
    const v = rest[i + 1];
    rest.splice(i, 2);
    return v;
  };
  if (cmd === 'matmul-model' && rest.length >= 1) {
    const size = Number(option('--size', '1024'));
    return matmulModel(rest[0], size);
  }
  if (cmd === 'flops' && rest.length === 1) return modelFlops(rest[0]);
  if (cmd === 'raw-to-pb') {
    const dims = option('--dims', null);
    if (dims !== null && rest.length === 2) return rawToPb(rest[0], rest[1], dims.split(',').map(Number));
  }
  throw new Error('usage: node onnx_tool.js matmul-model DIR [--size S] | flops MODEL | raw-to-pb RAW OUT --dims D,D');
}

try {
  console.log(JSON.stringify(main(process.argv.slice(2))));
} catch (e) {
  console.error(`onnx_tool: ${e.message}`);
  process.exit(1);
}

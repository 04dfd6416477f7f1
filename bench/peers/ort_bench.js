'use strict';
// Times one ONNX model on ONNX Runtime (onnxruntime-node, CPU execution provider) and prints one JSON line.
//
//   node ort_bench.js MODEL [--opt disabled|all] [--threads 2] [--iterations N] --input-pb FILE... [--save-output F]
//
// Inputs are TensorProto files in graph input order (the ONNX backend-test layout). After one warm-up run, N runs
// are timed one by one; median_ms and min_ms are over those N. `nodes` is the node count of the graph ORT actually
// runs: the session writes its optimised model (optimizedModelFilePath) to a temporary file, whose top-level nodes
// are counted. --save-output writes the first output as raw little-endian values; `output` in the JSON gives its
// name, type and dims.

const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require('onnxruntime-node');
const proto = require('./proto');

const USAGE = 'usage: node ort_bench.js MODEL [--opt disabled|all] [--threads T] [--iterations N] ' +
              '--input-pb FILE... [--save-output FILE]';

function parseArgs(argv) {
  const args = { model: null, opt: 'all', threads: 2, iterations: 10, inputs: [], saveOutput: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value\n${USAGE}`);
      return argv[++i];
    };
    if (a === '--opt') args.opt = value();
    else if (a === '--threads') args.threads = Number(value());
    else if (a === '--iterations') args.iterations = Number(value());
    else if (a === '--save-output') args.saveOutput = value();
    else if (a === '--input-pb') {
      // Takes every following argument up to the next option, like the graph-autofusion CLI.
      while (i + 1 < argv.length && !argv[i + 1].startsWith('--')) args.inputs.push(argv[++i]);
    } else if (a.startsWith('--')) throw new Error(`unknown option ${a}\n${USAGE}`);
    else if (args.model === null) args.model = a;
    else throw new Error(`unexpected argument ${a}\n${USAGE}`);
  }
  if (!args.model) throw new Error(USAGE);
  if (!['disabled', 'all'].includes(args.opt)) throw new Error(`--opt must be disabled or all, not ${args.opt}`);
  if (!(args.threads >= 1)) throw new Error('--threads must be >= 1');
  if (!(Number.isInteger(args.iterations) && args.iterations >= 1)) throw new Error('--iterations must be >= 1');
  return args;
}

const ORT_TYPE = { [proto.DataType.FLOAT]: 'float32', [proto.DataType.INT32]: 'int32',
                   [proto.DataType.INT64]: 'int64' };

// Input TensorProto files, matched to the session's inputs by position.
function loadFeeds(session, files) {
  if (files.length !== session.inputNames.length) {
    throw new Error(`model has ${session.inputNames.length} input(s) [${session.inputNames}], ` +
                    `got ${files.length} --input-pb file(s)`);
  }
  const feeds = {};
  session.inputNames.forEach((name, i) => {
    const t = proto.decodeTensor(fs.readFileSync(files[i]));
    feeds[name] = new ort.Tensor(ORT_TYPE[t.dataType], t.data, t.dims);
  });
  return feeds;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-bench-'));
  const optimizedPath = path.join(tmp, 'optimized.onnx');
  try {
    const session = await ort.InferenceSession.create(args.model, {
      executionProviders: ['cpu'],
      graphOptimizationLevel: args.opt,
      intraOpNumThreads: args.threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      optimizedModelFilePath: optimizedPath,
      logSeverityLevel: 3,                    // errors only: 'all' warns that the saved model is hardware specific
    });
    const nodes = proto.countNodes(fs.readFileSync(optimizedPath));
    const feeds = loadFeeds(session, args.inputs);

    let results = await session.run(feeds);   // warm-up
    const times = [];
    for (let i = 0; i < args.iterations; i++) {
      const start = process.hrtime.bigint();
      results = await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - start) / 1e6);
    }

    const first = results[session.outputNames[0]];
    if (args.saveOutput) {
      const d = first.data;
      fs.writeFileSync(args.saveOutput, Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    }
    console.log(JSON.stringify({
      model: args.model,
      opt: args.opt,
      threads: args.threads,
      iterations: args.iterations,
      median_ms: median(times),
      min_ms: Math.min(...times),
      nodes,
      nodes_source: 'ORT-optimised model (optimizedModelFilePath)',
      output: { name: session.outputNames[0], type: first.type, dims: first.dims, file: args.saveOutput },
    }));
    await session.release();
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(`ort_bench: ${e.message}`);
  process.exit(1);
});

'use strict';
// Greedy decoding on ONNX Runtime (onnxruntime-node, CPU), the loop `graph-autofusion generate` runs: a prefill of
// the prompt with empty pasts, then one token per step with the presents fed back as pasts (ORT tensors passed on
// as they come, no copies on our side). Prints one JSON line: time to first token, each step's time, peak RSS, ids.
//
//   node ort_generate.js MODEL --prompt 5,17,3 [--tokens N] [--threads 2] [--opt all|disabled] [--prefill-runs R]
//
// --prefill-runs R: after the loop, the prompt's prefill again R times on the warm session (empty pasts each time);
// prefill_warm_ms is their median (a server's prefill latency; prefill_ms is a fresh session's first run), and
// prefill_after_steps_ms the first of them (a new prompt right after a generation).
//
// Inputs are found by name as generate finds them: input_ids, past* (float, the dynamic dim besides the batch is
// the sequence), outputs logits (or the first) and present* paired with the pasts in order.

const path = require('path');
const ort = require(path.join(__dirname, '../peers/node_modules/onnxruntime-node'));

const USAGE =
  'usage: node ort_generate.js MODEL --prompt IDS [--tokens N] [--threads T] [--opt all|disabled] [--prefill-runs R]';

function parseArgs(argv) {
  const a = { model: null, prompt: null, tokens: 32, threads: 2, opt: 'all', prefillRuns: 0 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${k} needs a value\n${USAGE}`);
      return argv[++i];
    };
    if (k === '--prompt') a.prompt = value().split(/[ ,]+/).filter((s) => s).map((s) => BigInt(s));
    else if (k === '--tokens') a.tokens = Number(value());
    else if (k === '--threads') a.threads = Number(value());
    else if (k === '--opt') a.opt = value();
    else if (k === '--prefill-runs') a.prefillRuns = Number(value());
    else if (k.startsWith('--')) throw new Error(`unknown option ${k}\n${USAGE}`);
    else if (a.model === null) a.model = k;
    else throw new Error(`unexpected argument ${k}\n${USAGE}`);
  }
  if (!a.model || !a.prompt || a.prompt.length === 0) throw new Error(USAGE);
  if (!(Number.isInteger(a.tokens) && a.tokens >= 1)) throw new Error('--tokens must be >= 1');
  if (!(Number.isInteger(a.prefillRuns) && a.prefillRuns >= 0)) throw new Error('--prefill-runs must be >= 0');
  if (!['all', 'disabled'].includes(a.opt)) throw new Error(`--opt must be all or disabled, not ${a.opt}`);
  return a;
}

function argmaxLast(t) {
  const vocab = t.dims[t.dims.length - 1];
  const d = t.data;
  let best = 0;
  for (let j = 1; j < vocab; j++) if (d[d.length - vocab + j] > d[d.length - vocab + best]) best = j;
  return best;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const session = await ort.InferenceSession.create(a.model, {
    intraOpNumThreads: a.threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: a.opt,
  });
  const meta = new Map(session.inputMetadata.map((m) => [m.name, m]));
  const pasts = session.inputNames.filter((n) => n.includes('past'));
  const presents = session.outputNames.filter((n) => n.includes('present'));
  if (pasts.length !== presents.length) throw new Error(`${pasts.length} pasts but ${presents.length} presents`);
  const logitsName = session.outputNames.includes('logits') ? 'logits' : session.outputNames[0];
  const feeds = {};
  const empty = {};
  for (const p of pasts) {
    const shape = meta.get(p).shape;
    let seen = false;
    const dims = shape.map((d, i) => {
      if (typeof d === 'number' && d >= 0) return i === 0 ? 1 : d;
      if (i === 0) return 1;
      if (seen) throw new Error(`past ${p} has more than one dynamic dim besides the batch`);
      seen = true;
      return 0;
    });
    empty[p] = feeds[p] = new ort.Tensor('float32', new Float32Array(0), dims);
  }
  let feed = a.prompt;
  const ids = [];
  const steps = [];
  let prefill = 0;
  for (let t = 0; t < a.tokens; t++) {
    feeds.input_ids = new ort.Tensor('int64', BigInt64Array.from(feed), [1, feed.length]);
    const t0 = process.hrtime.bigint();
    const out = await session.run(feeds);
    const next = argmaxLast(out[logitsName]);
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    if (t === 0) prefill = dt;
    else steps.push(dt);
    pasts.forEach((p, k) => { feeds[p] = out[presents[k]]; });
    ids.push(next);
    feed = [BigInt(next)];
  }
  const warm = [];
  for (let r = 0; r < a.prefillRuns; r++) {
    const f = { ...empty, input_ids: new ort.Tensor('int64', BigInt64Array.from(a.prompt), [1, a.prompt.length]) };
    const t0 = process.hrtime.bigint();
    const out = await session.run(f);
    argmaxLast(out[logitsName]);
    warm.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  const medianOf = (v) => {
    const s = [...v].sort((x, y) => x - y);
    return s.length ? s[Math.floor(s.length / 2)] : 0;
  };
  const median = medianOf(steps);
  const total = steps.reduce((x, y) => x + y, 0);
  console.log(JSON.stringify({
    prefill_ms: prefill * 1e3, prefill_warm_ms: medianOf(warm) * 1e3, prefill_after_steps_ms: warm.length ? warm[0] * 1e3 : 0,
    median_step_ms: median * 1e3, tokens_per_s: total > 0 ? steps.length / total : 0,
    first_step_ms: steps.length ? steps[0] * 1e3 : 0, last_step_ms: steps.length ? steps[steps.length - 1] * 1e3 : 0,
    peak_rss_mb: process.resourceUsage().maxRSS / 1024, ids,
  }));
}

main().catch((e) => {
  console.error(`ort_generate.js: ${e.message}`);
  process.exit(1);
});

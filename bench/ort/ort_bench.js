'use strict';
// Times one ONNX model in ONNX Runtime (onnxruntime-node, CPU execution provider) and prints one
// JSON line. The ORT half of bench/compare.py; usable on its own.
//
// Inputs come either from a test data folder (input_K.pb TensorProtos) or are seeded random
// tensors of a chosen batch size, shaped like the model's test_data_set_0 (falling back to the
// model's declared input shapes).
const fs = require('fs');
const path = require('path');
const { loadOrt, sessionOptions, parseArgs, usageError } = require('./ort_common.js');
const { listTensorFiles, readTensorFile, writeTensorFile } = require('./tensor_proto.js');

const USAGE = `usage: node ort_bench.js MODEL.onnx [--input-dir DIR | --batch B [--seed S] [--dim NAME=SIZE]...]
         [--threads N] [--iterations N] [--warmup N] [--opt disabled|basic|extended|all]
         [--name NAME] [--save-inputs DIR]
  --input-dir DIR   run on DIR/input_K.pb (default: the model folder's test_data_set_0)
  --batch B         run on seeded random inputs with batch size B instead; shapes are taken from
                    --input-dir or test_data_set_0 with the first axis set to B, else from the
                    model's inputs (symbolic axes: --dim NAME=SIZE, else B for
                    the first axis and 1 for the others)
  --save-inputs DIR write the inputs as DIR/input_K.pb and exit without timing anything
  prints {model, batch, threads, median_ms, p90_ms, min_ms, session_create_ms, peak_rss_mb,
          iterations, ...} as one JSON line`;

const DEFAULTS = {
  input_dir: '',
  batch: 0,
  seed: 1234,
  dim: [],
  threads: 2,
  iterations: 50,
  warmup: 5,
  opt: 'all',
  name: '',
  save_inputs: '',
};

// ---------------------------------------------------------------------------------------------
// Seeded random inputs

// xorshift32: small, fast and the same on every machine, which is all a benchmark input needs.
function makeRng(seed) {
  let s = (seed >>> 0) || 0x9e3779b9;
  const nextU32 = () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s;
  };
  const uniform = () => (nextU32() + 0.5) / 4294967296; // in (0, 1)
  let spare = null;
  const normal = () => { // Box-Muller, both values used
    if (spare !== null) { const v = spare; spare = null; return v; }
    const r = Math.sqrt(-2 * Math.log(uniform()));
    const t = 2 * Math.PI * uniform();
    spare = r * Math.sin(t);
    return r * Math.cos(t);
  };
  return { uniform, normal };
}

// One input's description: name, ORT type, concrete dims, and for integer inputs the value range
// [lo, hi] to draw from (taken from the template tensor, so token ids stay inside the vocabulary).
function randomTensor(spec, rng) {
  const n = spec.dims.reduce((a, b) => a * b, 1);
  const intIn = (lo, hi) => lo + Math.min(hi - lo, Math.floor(rng.uniform() * (hi - lo + 1)));
  switch (spec.type) {
    case 'float32': case 'float64': {
      const data = spec.type === 'float32' ? new Float32Array(n) : new Float64Array(n);
      for (let i = 0; i < n; i++) data[i] = rng.normal();
      return { name: spec.name, type: spec.type, dims: spec.dims, data };
    }
    case 'int64': case 'uint64': {
      const data = spec.type === 'int64' ? new BigInt64Array(n) : new BigUint64Array(n);
      for (let i = 0; i < n; i++) data[i] = BigInt(intIn(spec.lo, spec.hi));
      return { name: spec.name, type: spec.type, dims: spec.dims, data };
    }
    case 'int32': case 'int16': case 'int8': case 'uint32': case 'uint16': case 'uint8': case 'bool': {
      const Typed = { int32: Int32Array, int16: Int16Array, int8: Int8Array, uint32: Uint32Array,
        uint16: Uint16Array, uint8: Uint8Array, bool: Uint8Array }[spec.type];
      const data = new Typed(n);
      for (let i = 0; i < n; i++) data[i] = intIn(spec.lo, spec.hi);
      return { name: spec.name, type: spec.type, dims: spec.dims, data };
    }
    default:
      throw new Error(`input '${spec.name}': cannot make random data of type ${spec.type}`);
  }
}

const INT_RANGES = { int8: [-128, 127], uint8: [0, 255], int16: [-100, 100], uint16: [0, 100],
  int32: [0, 1], uint32: [0, 1], int64: [0, 1], uint64: [0, 1], bool: [0, 1] };

function rangeOf(data) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of data) {
    const x = Number(v);
    if (x < lo) lo = x;
    if (x > hi) hi = x;
  }
  return [lo, hi];
}

// Input specs from a folder of input_K.pb files, with the first axis replaced by `batch`.
function specsFromTemplate(dir, batch) {
  return listTensorFiles(dir, 'input').map((f) => {
    const t = readTensorFile(f);
    const dims = t.dims.slice();
    if (dims.length > 0) dims[0] = batch;
    const [lo, hi] = t.type.startsWith('float') ? [0, 0] : rangeOf(t.data);
    return { name: t.name, type: t.type, dims, lo, hi };
  });
}

// Input specs from the session's declared inputs, when there is no template folder.
function specsFromSession(session, batch, dimOverrides) {
  return session.inputMetadata.map((m) => {
    if (!m.isTensor) throw new Error(`input '${m.name}' is not a tensor`);
    const dims = m.shape.map((d, axis) => {
      if (typeof d === 'number' && d >= 0) return d;
      if (typeof d === 'string' && d in dimOverrides) return dimOverrides[d];
      return axis === 0 ? batch : 1;
    });
    const [lo, hi] = INT_RANGES[m.type] || [0, 0];
    return { name: m.name, type: m.type, dims, lo, hi };
  });
}

function parseDims(list) {
  const out = {};
  for (const item of list) {
    const m = /^([^=]+)=(\d+)$/.exec(item);
    if (!m) throw new Error(`--dim wants NAME=SIZE, got '${item}'`);
    out[m[1]] = Number(m[2]);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Timing

function percentile(sorted, q) {
  // Linear interpolation between closest ranks (numpy's default), so the median of an even count
  // is the mean of the middle two.
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

const round3 = (x) => Math.round(x * 1000) / 1000;
const msSince = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

async function main(opts, modelPath) {
  const baselineRssMb = process.memoryUsage().rss / (1024 * 1024);
  const ort = loadOrt();
  const modelDir = path.dirname(path.resolve(modelPath));
  const name = opts.name || (path.basename(modelPath) === 'model.onnx'
    ? path.basename(modelDir) : path.basename(modelPath, '.onnx'));
  const defaultSet = path.join(modelDir, 'test_data_set_0');

  let session = null;
  const createSession = async () => {
    const t0 = process.hrtime.bigint();
    session = await ort.InferenceSession.create(modelPath, sessionOptions(opts));
    return msSince(t0);
  };

  // Inputs first: reading/generating them is not part of anything we time.
  let tensors;
  let inputSource;
  if (opts.batch > 0) {
    const template = opts.input_dir || (fs.existsSync(defaultSet) ? defaultSet : '');
    let specs;
    if (template) {
      specs = specsFromTemplate(template, opts.batch);
    } else {
      // No template: only a session knows the input shapes. It is thrown away and the timed one
      // below made afresh, so session_create_ms measures one whole creation either way.
      await createSession();
      specs = specsFromSession(session, opts.batch, parseDims(opts.dim));
      session = null;
    }
    const rng = makeRng(opts.seed);
    tensors = specs.map((s) => randomTensor(s, rng));
    inputSource = `random(seed=${opts.seed})`;
  } else {
    const dir = opts.input_dir || defaultSet;
    if (!fs.existsSync(dir)) throw new Error(`no inputs: ${dir} does not exist (give --input-dir or --batch)`);
    tensors = listTensorFiles(dir, 'input').map(readTensorFile);
    if (tensors.length === 0) throw new Error(`no input_K.pb files in ${dir}`);
    inputSource = path.basename(path.resolve(dir));
  }

  if (opts.save_inputs) {
    fs.mkdirSync(opts.save_inputs, { recursive: true });
    tensors.forEach((t, i) => writeTensorFile(path.join(opts.save_inputs, `input_${i}.pb`), t));
    console.log(JSON.stringify({ model: name, saved_inputs: opts.save_inputs,
      inputs: tensors.map((t) => ({ name: t.name, type: t.type, dims: t.dims })) }));
    return;
  }

  const sessionCreateMs = await createSession();
  if (tensors.length !== session.inputNames.length) {
    throw new Error(`${tensors.length} inputs given but the model has ${session.inputNames.length} `
                    + `(${session.inputNames.join(', ')})`);
  }
  const feeds = {};
  tensors.forEach((t, i) => {
    // Match by name; fall back to position for files whose tensor name is empty or different.
    const key = session.inputNames.includes(t.name) ? t.name : session.inputNames[i];
    feeds[key] = new ort.Tensor(t.type, t.data, t.dims);
  });

  for (let i = 0; i < opts.warmup; i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < opts.iterations; i++) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(msSince(t0));
  }
  const sorted = times.slice().sort((a, b) => a - b);
  const mean = times.reduce((a, b) => a + b, 0) / Math.max(1, times.length);

  const result = {
    model: name,
    batch: tensors[0].dims.length > 0 ? tensors[0].dims[0] : 1,
    threads: opts.threads,
    median_ms: round3(percentile(sorted, 0.5)),
    p90_ms: round3(percentile(sorted, 0.9)),
    min_ms: round3(sorted[0]),
    mean_ms: round3(mean),
    session_create_ms: round3(sessionCreateMs),
    // maxRSS is in kilobytes; it is the whole process's peak, Node itself included (see
    // baseline_rss_mb for what Node used before onnxruntime was loaded).
    peak_rss_mb: round3(process.resourceUsage().maxRSS / 1024),
    baseline_rss_mb: round3(baselineRssMb),
    iterations: opts.iterations,
    warmup: opts.warmup,
    opt: opts.opt,
    inputs: inputSource,
    engine: 'onnxruntime',
    ort_version: ort.env.versions.common,
  };
  console.log(JSON.stringify(result));
}

let parsed;
try {
  parsed = parseArgs(process.argv.slice(2), { defaults: DEFAULTS });
  if (parsed.positional.length !== 1) throw new Error('expected exactly one MODEL.onnx');
  const o = parsed.opts;
  if (!Number.isInteger(o.iterations) || o.iterations < 1) throw new Error('--iterations must be >= 1');
  if (!Number.isInteger(o.warmup) || o.warmup < 0) throw new Error('--warmup must be >= 0');
  if (!Number.isInteger(o.batch) || o.batch < 0) throw new Error('--batch must be a positive integer');
  sessionOptions(o); // validates --threads and --opt before any work
} catch (e) {
  usageError(USAGE, e.message);
}
main(parsed.opts, parsed.positional[0]).catch((e) => {
  console.error(`ort_bench.js: ${process.env.KILN_BENCH_DEBUG && e.stack ? e.stack : e.message || e}`);
  process.exit(1);
});

'use strict';
// A greedy decode loop with the KV cache in ONNX Runtime (onnxruntime-node, CPU): the ORT half of
// bench/decode.py, usable on its own. Prints one JSON line.
//
//   node ort_decode.js MODEL.onnx [--prompt 1,2,3] [--steps 64] [--reference FILE|none]
//        [--threads 2] [--opt all] [--past-axis 2] [--dim NAME=SIZE]...
//
// The decoder's contract (what tests/data/dynamic_models/gpt_kv and Hugging Face optimum exports
// of GPT-2-like models follow):
//   * `input_ids` int64 [batch, sequence]: the tokens fed this step;
//   * cache inputs, whose names start with `past` ([batch, heads, past, head_dim] for the default
//     --past-axis 2), each paired with the output of the same name with `past_key_values` or
//     `past` replaced by `present`, which the next step gets as that input;
//   * optional `attention_mask` int64 [batch, past + sequence] (all ones here) and
//     `position_ids` int64 [batch, sequence] (past, past + 1, ...);
//   * the logits: the output named `logits`, else the first output, [batch, sequence, vocab].
// Step 0 (prefill) feeds the prompt with empty cache tensors (past 0); each later step feeds the
// previous token (sequence 1). The token is the argmax of the last position's logits (the first
// one on a tie). Batch 1.
//
// The prompt and step count come from --prompt/--steps, else from the reference file, which by
// default is greedy_64.json next to the model when it exists ({prompt, steps, tokens}); the JSON
// says whether the tokens equal the reference's.
//
// Timing: `session_create_ms` is InferenceSession.create; `first_call_ms` is that plus the
// prefill step (what a user waits for before the first token, the counterpart of Kiln's
// parse + compile + first run); `step_ms` lists each later step's session.run (sequence 1),
// `median_ms` / `p90_ms` / `min_ms` are over those; `loop_ms` is the whole loop after session
// creation, feeds and argmax included.
const fs = require('fs');
const path = require('path');
const { loadOrt, sessionOptions, parseArgs, usageError } = require('./ort_common.js');

const USAGE = `usage: node ort_decode.js MODEL.onnx [--prompt 1,2,3] [--steps 64] [--reference FILE|none]
         [--threads N] [--opt disabled|basic|extended|all] [--past-axis 2] [--dim NAME=SIZE]...`;

const DEFAULTS = {
  prompt: '',
  steps: 0,
  reference: '',
  threads: 2,
  opt: 'all',
  past_axis: 2,
  dim: [],
};

const round3 = (x) => Math.round(x * 1000) / 1000;
const msSince = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

function percentile(sorted, q) {
  // Linear interpolation between closest ranks, as ort_bench.js and numpy do.
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
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

// The output a cache input hands its next value over from, or null.
function presentName(pastName, outputNames) {
  const candidates = [pastName.replace(/^past_key_values/, 'present'), pastName.replace(/^past/, 'present')];
  return candidates.find((c) => c !== pastName && outputNames.includes(c)) || null;
}

// Works out each input's role and the empty cache shapes from the session's metadata.
function makePlan(session, opts) {
  const dims = parseDims(opts.dim);
  const plan = { ids: null, mask: null, positions: null, cache: [], logits: null };
  for (const m of session.inputMetadata) {
    const name = m.name;
    if (name === 'input_ids') {
      plan.ids = name;
    } else if (name === 'attention_mask') {
      plan.mask = name;
    } else if (name === 'position_ids') {
      plan.positions = name;
    } else if (name.startsWith('past')) {
      const present = presentName(name, session.outputNames);
      if (!present) throw new Error(`cache input '${name}' has no matching present output (outputs: ${session.outputNames.join(', ')})`);
      if (!m.isTensor) throw new Error(`input '${name}' is not a tensor`);
      if (opts.past_axis < 1 || opts.past_axis >= m.shape.length) {
        throw new Error(`--past-axis ${opts.past_axis} is outside '${name}' of rank ${m.shape.length}`);
      }
      const shape = m.shape.map((d, axis) => {
        if (axis === 0) return 1; // batch
        if (axis === opts.past_axis) return 0; // the prefill's empty cache
        if (typeof d === 'number' && d >= 0) return d;
        if (typeof d === 'string' && d in dims) return dims[d];
        throw new Error(`axis ${axis} of '${name}' is symbolic ('${d}'): give --dim ${d}=SIZE`);
      });
      plan.cache.push({ name, present, type: m.type, shape });
    } else {
      throw new Error(`input '${name}' is none of input_ids, attention_mask, position_ids, past*`);
    }
  }
  if (!plan.ids) throw new Error(`the model has no 'input_ids' input (inputs: ${session.inputNames.join(', ')})`);
  if (plan.cache.length === 0) throw new Error('the model has no past* cache inputs: it is not a decoder with a KV cache');
  plan.logits = session.outputNames.includes('logits') ? 'logits' : session.outputNames[0];
  return plan;
}

function loadReference(opts, modelPath) {
  let file = opts.reference;
  if (file === 'none') return null;
  if (!file) {
    const guess = path.join(path.dirname(path.resolve(modelPath)), 'greedy_64.json');
    if (!fs.existsSync(guess)) return null;
    file = guess;
  }
  const ref = JSON.parse(fs.readFileSync(file, 'utf8'));
  return { file, prompt: ref.prompt, steps: ref.steps || (ref.tokens || []).length, tokens: ref.tokens || null };
}

function argmaxLast(t) {
  // logits [1, sequence, vocab]: the last position's row.
  const vocab = t.dims[t.dims.length - 1];
  const data = t.data;
  const start = data.length - vocab;
  let best = start;
  for (let i = start + 1; i < data.length; i++) if (data[i] > data[best]) best = i;
  return best - start;
}

async function main(opts, modelPath) {
  const ort = loadOrt();
  const ref = loadReference(opts, modelPath);
  const prompt = opts.prompt ? opts.prompt.split(',').map((s) => Number(s.trim()))
    : (ref ? ref.prompt : null);
  if (!prompt || prompt.length === 0 || prompt.some((v) => !Number.isInteger(v) || v < 0)) {
    throw new Error('no prompt: give --prompt 1,2,3 or a reference file with one');
  }
  const steps = opts.steps || (ref ? ref.steps : 0) || 64;

  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(modelPath, sessionOptions(opts));
  const sessionCreateMs = msSince(t0);
  const plan = makePlan(session, opts);

  const empty = (c) => {
    const n = c.shape.reduce((a, b) => a * b, 1);
    if (c.type !== 'float32') throw new Error(`cache input '${c.name}' is ${c.type}; only float32 caches are handled`);
    return new ort.Tensor('float32', new Float32Array(n), c.shape);
  };
  let cache = plan.cache.map(empty);
  let ids = prompt;
  let past = 0;
  const tokens = [];
  const stepMs = [];
  let prefillMs = 0;
  const loop0 = process.hrtime.bigint();
  for (let step = 0; step < steps; step++) {
    const seq = ids.length;
    const feeds = { [plan.ids]: new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, seq]) };
    if (plan.mask) feeds[plan.mask] = new ort.Tensor('int64', new BigInt64Array(past + seq).fill(1n), [1, past + seq]);
    if (plan.positions) {
      feeds[plan.positions] = new ort.Tensor('int64', BigInt64Array.from({ length: seq }, (_, i) => BigInt(past + i)), [1, seq]);
    }
    plan.cache.forEach((c, i) => { feeds[c.name] = cache[i]; });
    const s0 = process.hrtime.bigint();
    const out = await session.run(feeds);
    const ms = msSince(s0);
    if (step === 0) prefillMs = ms;
    else stepMs.push(ms);
    const tok = argmaxLast(out[plan.logits]);
    tokens.push(tok);
    cache = plan.cache.map((c) => out[c.present]);
    past += seq;
    ids = [tok];
  }
  const loopMs = msSince(loop0);
  const sorted = stepMs.slice().sort((a, b) => a - b);
  let matches = null;
  let firstMismatch = null;
  // Compared only when the loop is the reference's (same prompt, at most its steps).
  const samePrompt = ref && ref.prompt && ref.prompt.length === prompt.length && ref.prompt.every((v, i) => v === prompt[i]);
  if (ref && ref.tokens && samePrompt && steps <= ref.tokens.length) {
    firstMismatch = -1;
    for (let i = 0; i < tokens.length; i++) if (tokens[i] !== ref.tokens[i]) { firstMismatch = i; break; }
    matches = firstMismatch === -1;
    if (firstMismatch === -1) firstMismatch = null;
  }
  const model = path.basename(modelPath) === 'model.onnx'
    ? path.basename(path.dirname(path.resolve(modelPath))) : path.basename(modelPath, '.onnx');
  console.log(JSON.stringify({
    engine: 'onnxruntime',
    ort_version: ort.env.versions.common,
    model,
    threads: opts.threads,
    opt: opts.opt,
    prompt,
    steps,
    session_create_ms: round3(sessionCreateMs),
    prefill_ms: round3(prefillMs),
    first_call_ms: round3(sessionCreateMs + prefillMs),
    median_ms: round3(percentile(sorted, 0.5)),
    p90_ms: round3(percentile(sorted, 0.9)),
    min_ms: round3(sorted.length ? sorted[0] : NaN),
    loop_ms: round3(loopMs),
    step_ms: stepMs.map(round3),
    peak_rss_mb: round3(process.resourceUsage().maxRSS / 1024),
    tokens,
    reference: ref ? ref.file : null,
    matches_reference: matches,
    first_mismatch: firstMismatch,
  }));
}

let parsed;
try {
  parsed = parseArgs(process.argv.slice(2), { defaults: DEFAULTS });
  if (parsed.positional.length !== 1) throw new Error('expected exactly one MODEL.onnx');
  const o = parsed.opts;
  if (!Number.isInteger(o.steps) || o.steps < 0) throw new Error('--steps must be a positive integer');
  if (!Number.isInteger(o.past_axis)) throw new Error('--past-axis must be an integer');
  sessionOptions(o);
} catch (e) {
  usageError(USAGE, e.message);
}
main(parsed.opts, parsed.positional[0]).catch((e) => {
  console.error(`ort_decode.js: ${process.env.KILN_BENCH_DEBUG && e.stack ? e.stack : e.message || e}`);
  process.exit(1);
});

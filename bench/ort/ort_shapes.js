'use strict';
// The ORT half of bench/shapes.py: one InferenceSession fed several input shapes. Prints one
// JSON line.
//
//   node ort_shapes.js PLAN.json [--threads 2] [--opt all]
//
// PLAN.json (written by shapes.py; the Kiln worker reads the same file, so both engines see the
// same data in the same order):
//   { "model": "path/model.onnx",
//     "mode": "latency" | "memory",
//     "cases": [ { "name": "s7", "dir": "folder with input_K.pb" }, ... ],
//     "warmup": 5, "iterations": 50,                 // latency: per case, after its first call
//     "sequence": ["b3", "b1", ...], "sample_after": 10 }   // memory: case names, one per call
//
// latency: for each case in order, the first session.run with that shape is timed on its own
// (`first_ms`), then `warmup` untimed runs, then `iterations` timed ones (median/p90/min). The
// cases run one after another in one session, so a later case's first call is the first time
// ORT sees that shape, as in a server.
// memory: runs `sequence` (one case per call) and reports the resident set (current RSS, not the
// peak) after `sample_after` calls and after the whole sequence.
const fs = require('fs');
const path = require('path');
const { loadOrt, sessionOptions, parseArgs, usageError } = require('./ort_common.js');
const { listTensorFiles, readTensorFile } = require('./tensor_proto.js');

const USAGE = 'usage: node ort_shapes.js PLAN.json [--threads N] [--opt disabled|basic|extended|all]';
const DEFAULTS = { threads: 2, opt: 'all' };

const round3 = (x) => Math.round(x * 1000) / 1000;
const msSince = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
const rssMb = () => process.memoryUsage().rss / (1024 * 1024);

function percentile(sorted, q) {
  // Linear interpolation between closest ranks (numpy's default), as ort_bench.js does.
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

async function main(opts, planPath) {
  const baselineRssMb = rssMb();
  const plan = JSON.parse(fs.readFileSync(planPath, 'utf8'));
  const ort = loadOrt();
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(plan.model, sessionOptions(opts));
  const sessionCreateMs = msSince(t0);

  // All inputs are read before anything is timed.
  const feeds = {};
  for (const c of plan.cases) {
    const tensors = listTensorFiles(c.dir, 'input').map(readTensorFile);
    if (tensors.length !== session.inputNames.length) {
      throw new Error(`case ${c.name}: ${tensors.length} inputs in ${c.dir}, the model has ${session.inputNames.length}`);
    }
    const f = {};
    tensors.forEach((t, i) => {
      const key = session.inputNames.includes(t.name) ? t.name : session.inputNames[i];
      f[key] = new ort.Tensor(t.type, t.data, t.dims);
    });
    feeds[c.name] = { feeds: f, shapes: Object.fromEntries(tensors.map((t) => [t.name, t.dims])) };
  }

  const result = {
    engine: 'onnxruntime',
    ort_version: ort.env.versions.common,
    mode: plan.mode,
    threads: opts.threads,
    opt: opts.opt,
    session_create_ms: round3(sessionCreateMs),
    baseline_rss_mb: round3(baselineRssMb),
  };

  if (plan.mode === 'memory') {
    const seq = plan.sequence || [];
    const sampleAfter = plan.sample_after || 10;
    let rssEarly = null;
    const t1 = process.hrtime.bigint();
    for (let i = 0; i < seq.length; i++) {
      const c = feeds[seq[i]];
      if (!c) throw new Error(`sequence names an unknown case '${seq[i]}'`);
      await session.run(c.feeds);
      if (i + 1 === sampleAfter) rssEarly = rssMb();
    }
    result.calls = seq.length;
    result.sample_after = sampleAfter;
    result.rss_early_mb = rssEarly === null ? null : round3(rssEarly);
    result.rss_end_mb = round3(rssMb());
    result.loop_ms = round3(msSince(t1));
  } else {
    result.cases = [];
    for (const c of plan.cases) {
      const { feeds: f, shapes } = feeds[c.name];
      const s0 = process.hrtime.bigint();
      await session.run(f);
      const firstMs = msSince(s0);
      for (let i = 0; i < plan.warmup; i++) await session.run(f);
      const times = [];
      for (let i = 0; i < plan.iterations; i++) {
        const s = process.hrtime.bigint();
        await session.run(f);
        times.push(msSince(s));
      }
      const sorted = times.slice().sort((a, b) => a - b);
      result.cases.push({
        name: c.name,
        shapes,
        first_ms: round3(firstMs),
        median_ms: round3(percentile(sorted, 0.5)),
        p90_ms: round3(percentile(sorted, 0.9)),
        min_ms: round3(sorted[0]),
        iterations: plan.iterations,
        warmup: plan.warmup,
      });
    }
  }
  // maxRSS is in kilobytes; Node itself is included (baseline_rss_mb: before ORT was loaded).
  result.peak_rss_mb = round3(process.resourceUsage().maxRSS / 1024);
  console.log(JSON.stringify(result));
}

let parsed;
try {
  parsed = parseArgs(process.argv.slice(2), { defaults: DEFAULTS });
  if (parsed.positional.length !== 1) throw new Error('expected exactly one PLAN.json');
  sessionOptions(parsed.opts);
} catch (e) {
  usageError(USAGE, e.message);
}
main(parsed.opts, parsed.positional[0]).catch((e) => {
  console.error(`ort_shapes.js: ${process.env.KILN_BENCH_DEBUG && e.stack ? e.stack : e.message || e}`);
  process.exit(1);
});

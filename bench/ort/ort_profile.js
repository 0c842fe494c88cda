'use strict';
// Runs one ONNX model RUNS times in ONNX Runtime (CPU) with its profiler on and prints, per
// node, the median kernel time over the runs in microseconds, the op type and the output
// shape, one JSON line per node in execution order. The ORT half of bench/layers.py.
//
//   node ort_profile.js MODEL.onnx IN_DIR [--runs N] [--threads N]
//
// The profiler adds a few microseconds to every node, so small nodes look slower than they
// run; compare whole runs with compare.py.
const fs = require('fs');
const os = require('os');
const path = require('path');
const { loadOrt, sessionOptions, parseArgs, usageError } = require('./ort_common.js');
const { listTensorFiles, readTensorFile } = require('./tensor_proto.js');

const USAGE = 'usage: node ort_profile.js MODEL.onnx IN_DIR [--runs N] [--threads N]';

async function main(opts, [modelPath, inDir]) {
  const ort = loadOrt();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-'));
  try {
    const so = Object.assign(sessionOptions({ threads: opts.threads, opt: 'all' }),
                             { enableProfiling: true, profileFilePrefix: path.join(dir, 'p') });
    const session = await ort.InferenceSession.create(modelPath, so);
    const feeds = {};
    listTensorFiles(inDir, 'input').map(readTensorFile).forEach((t, i) => {
      const key = session.inputNames.includes(t.name) ? t.name : session.inputNames[i];
      feeds[key] = new ort.Tensor(t.type, t.data, t.dims);
    });
    for (let i = 0; i < opts.runs; ++i) await session.run(feeds);
    session.endProfiling();
    const file = fs.readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => path.join(dir, f))[0];
    if (!file) throw new Error('ONNX Runtime wrote no profile');
    const nodes = new Map();
    for (const e of JSON.parse(fs.readFileSync(file))) {
      if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
      const name = e.name.slice(0, -'_kernel_time'.length);
      if (!nodes.has(name)) {
        const shapes = (e.args.output_type_shape || []).map((o) => Object.values(o)[0]);
        nodes.set(name, { name, op: e.args.op_name, shape: shapes[0] || [], us: [] });
      }
      nodes.get(name).us.push(e.dur);
    }
    for (const n of nodes.values()) {
      n.us.sort((a, b) => a - b);
      console.log(JSON.stringify({ name: n.name, op: n.op, shape: n.shape, median_us: n.us[n.us.length >> 1] }));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

let parsed;
try {
  parsed = parseArgs(process.argv.slice(2), { defaults: { runs: 100, threads: 2 } });
} catch (e) {
  usageError(USAGE, e.message);
}
if (parsed.positional.length !== 2) usageError(USAGE, 'expected MODEL.onnx and IN_DIR');
main(parsed.opts, parsed.positional).catch((e) => { console.error(e.message); process.exit(1); });

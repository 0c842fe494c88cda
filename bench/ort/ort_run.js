'use strict';
// Runs one ONNX model once in ONNX Runtime (CPU) on the input_K.pb files of a folder and writes
// the results as output_K.pb (K in the order of the graph's outputs, each tensor named after its
// graph output), so Kiln's results on any model can be compared with ORT's by hand.
//
//   node ort_run.js MODEL.onnx IN_DIR OUT_DIR [--opt disabled|basic|extended|all] [--threads N]
//
// The default optimization level is 'disabled', the setting the reference outputs in
// ../shared/models were made with: the graph then runs op by op as the ONNX spec writes it,
// with no fusions that change rounding. Prints one JSON line describing the outputs.
const fs = require('fs');
const path = require('path');
const { loadOrt, sessionOptions, parseArgs, usageError } = require('./ort_common.js');
const { listTensorFiles, readTensorFile, writeTensorFile } = require('./tensor_proto.js');

const USAGE = 'usage: node ort_run.js MODEL.onnx IN_DIR OUT_DIR [--opt disabled|basic|extended|all] [--threads N]';

async function main(opts, [modelPath, inDir, outDir]) {
  const ort = loadOrt();
  const session = await ort.InferenceSession.create(modelPath, sessionOptions(opts));
  const tensors = listTensorFiles(inDir, 'input').map(readTensorFile);
  if (tensors.length !== session.inputNames.length) {
    throw new Error(`${inDir} has ${tensors.length} input_K.pb files but the model has `
                    + `${session.inputNames.length} inputs (${session.inputNames.join(', ')})`);
  }
  const feeds = {};
  tensors.forEach((t, i) => {
    const key = session.inputNames.includes(t.name) ? t.name : session.inputNames[i];
    feeds[key] = new ort.Tensor(t.type, t.data, t.dims);
  });
  const results = await session.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  const outputs = session.outputNames.map((name, i) => {
    const t = results[name];
    writeTensorFile(path.join(outDir, `output_${i}.pb`), { name, type: t.type, dims: t.dims, data: t.data });
    return { name, type: t.type, dims: Array.from(t.dims) };
  });
  console.log(JSON.stringify({ ort_version: ort.env.versions.common, opt: opts.opt,
    threads: opts.threads, outputs }));
}

let parsed;
try {
  parsed = parseArgs(process.argv.slice(2), { defaults: { opt: 'disabled', threads: 2 } });
  if (parsed.positional.length !== 3) throw new Error('expected MODEL.onnx IN_DIR OUT_DIR');
  sessionOptions(parsed.opts);
} catch (e) {
  usageError(USAGE, e.message);
}
main(parsed.opts, parsed.positional).catch((e) => {
  console.error(`ort_run.js: ${process.env.KILN_BENCH_DEBUG && e.stack ? e.stack : e.message || e}`);
  process.exit(1);
});

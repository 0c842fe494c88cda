'use strict';
// Shared by ort_bench.js and ort_run.js: finding onnxruntime-node, the session options both use,
// and a tiny argument parser.
const fs = require('fs');
const path = require('path');

// onnxruntime-node is looked for, in order, at $ORT_NODE_MODULE (a package folder), in the cache
// that bench/install_ort.sh fills ($KILN_ORT_CACHE or bench/.cache/ort), and then through Node's
// normal resolution (e.g. `npm install` run in this folder).
function loadOrt() {
  const candidates = [];
  if (process.env.ORT_NODE_MODULE) candidates.push(process.env.ORT_NODE_MODULE);
  const cache = process.env.KILN_ORT_CACHE || path.join(__dirname, '..', '.cache', 'ort');
  candidates.push(path.join(cache, 'node_modules', 'onnxruntime-node'));
  for (const c of candidates) {
    if (fs.existsSync(path.join(c, 'package.json'))) return require(path.resolve(c));
  }
  try {
    return require('onnxruntime-node');
  } catch (e) {
    throw new Error('onnxruntime-node not found: run `bash bench/install_ort.sh` or set ORT_NODE_MODULE '
                    + `(looked in ${candidates.join(', ')} and the normal Node module paths)`);
  }
}

const OPT_LEVELS = ['disabled', 'basic', 'extended', 'all'];

// The configuration every Kiln-vs-ORT number uses: CPU execution provider, N intra-op threads,
// one inter-op thread, sequential execution. The memory arena and ORT's default thread spinning
// stay on, because that is how people deploy ORT and so what Kiln is compared with.
function sessionOptions({ threads, opt }) {
  if (!OPT_LEVELS.includes(opt)) {
    throw new Error(`--opt must be one of ${OPT_LEVELS.join('|')}, got '${opt}'`);
  }
  if (!Number.isInteger(threads) || threads < 1) {
    throw new Error(`--threads must be a positive integer, got '${threads}'`);
  }
  return {
    executionProviders: ['cpu'],
    graphOptimizationLevel: opt,
    executionMode: 'sequential',
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
  };
}

// Parses `--flag value` pairs (and bare `--flag` for names in `booleans`) into an object and
// collects the rest as positionals. Unknown flags are errors, so typos do not go unnoticed.
function parseArgs(argv, spec) {
  const opts = { ...spec.defaults };
  const positional = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) {
      positional.push(a);
      continue;
    }
    const key = a.slice(2).replace(/-/g, '_');
    if ((spec.booleans || []).includes(key)) {
      opts[key] = true;
    } else if (key in spec.defaults) {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      const v = argv[++i];
      if (Array.isArray(spec.defaults[key])) opts[key] = [...opts[key], v];
      else opts[key] = typeof spec.defaults[key] === 'number' ? Number(v) : v;
    } else {
      throw new Error(`unknown option ${a}`);
    }
  }
  return { opts, positional };
}

// Prints a usage error and exits with status 2 (runtime failures exit with 1 instead).
function usageError(usage, message) {
  console.error(message);
  console.error(usage);
  process.exit(2);
}

module.exports = { loadOrt, sessionOptions, parseArgs, usageError, OPT_LEVELS };

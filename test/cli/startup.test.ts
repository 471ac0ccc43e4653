/**
 * Start-up: `run --url` loads only what sending needs before its first request. Charts,
 * schemas, the progress line and the table library are loaded lazily, where they are used.
 * Counted in modules (a module-resolve hook lists every module the CLI loads), not in
 * milliseconds, so it holds on a busy machine; bench/startup.ts measures the CPU.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { CLI, collect, tempDir } from '../helpers/cli.js';
import { chatEvent, DONE, startScriptedServer, usageEvent } from '../helpers/scriptedServer.js';

/** Packages a live run must not load before its first request. */
const LAZY = [
  'echarts',
  'zrender',
  'zod',
  'log-update',
  'cli-table3',
  'gpt-tokenizer',
  'yaml',
  'undici',
];

/**
 * CommonJS loads (createRequire, as the charts, tables, YAML and zod are loaded where they are
 * used) go through Module._load, which no ES-module hook sees: this preload logs them too.
 */
const CJS_HOOK = `const Module = require('node:module');
const { appendFileSync } = require('node:fs');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (...args) {
  const file = resolve.apply(this, args);
  appendFileSync(process.env.MODULE_LOG, 'file://' + file + '\\n');
  return file;
};`;

/** A resolve hook (in the loader thread) that appends each resolved URL to $MODULE_LOG. */
const HOOK = `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(process.env.MODULE_LOG, resolved.url + '\\n');
  return resolved;
}`;

const packagesIn = (urls: string[]) =>
  new Set(
    urls.flatMap((u) => {
      const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(u);
      return m ? [m[1]] : [];
    }),
  );

test('run --url loads no charts, YAML, schemas, progress line or tables before its first request', async () => {
  const dir = tempDir('ig-startup-');
  const hook = join(dir, 'hook.mjs');
  writeFileSync(hook, HOOK);
  const register = join(dir, 'register.mjs');
  writeFileSync(
    register,
    `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hook).href)});\n`,
  );
  const cjsHook = join(dir, 'cjs-hook.cjs');
  writeFileSync(cjsHook, CJS_HOOK);
  const log = join(dir, 'modules.txt');
  writeFileSync(log, '');
  let beforeFirst: string[] | undefined;
  const server = await startScriptedServer((request) => {
    beforeFirst ??= readFileSync(log, 'utf8').split('\n').filter(Boolean);
    if (request.path.endsWith('/models')) {
      return {
        headers: { 'content-type': 'application/json' },
        steps: [
          { write: JSON.stringify({ object: 'list', data: [{ id: 'm', object: 'model' }] }) },
        ],
      };
    }
    if (request.method !== 'POST')
      return { status: 404, headers: { 'content-type': 'text/plain' }, steps: [] };
    return {
      steps: [
        { write: chatEvent({ content: 'hi' }) },
        { write: usageEvent(8, 1) },
        { write: DONE },
      ],
    };
  });
  try {
    const child = spawn(
      process.execPath,
      [
        // The command line's own flags (tsx's loader when it runs from source) come first, so
        // the logging hooks see every module it resolves.
        ...CLI.slice(0, -1),
        '--import',
        register,
        '--require',
        cjsHook,
        ...CLI.slice(-1),
        'run',
        '--url',
        server.url,
        '--requests',
        '1',
        '--out',
        join(dir, 'out'),
      ],
      {
        env: { ...process.env, OPENAI_API_KEY: undefined, MODULE_LOG: log },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const result = await collect(child);
    assert.equal(result.code, 0, result.stderr);
    assert.ok(beforeFirst, 'the server was asked nothing');
    // The hook saw the run's own modules, so an empty list cannot pass.
    assert.ok(
      beforeFirst.some((u) => /\/session\/run\.[jt]s$/.test(u)),
      'session/run not loaded',
    );
    const early = packagesIn(beforeFirst);
    assert.deepEqual(
      LAZY.filter((p) => early.has(p)),
      [],
      `loaded before the first request: ${[...early].join(', ')}`,
    );
    // After the run, report.html was rendered: the charts were loaded then, where they are used.
    const all = packagesIn(readFileSync(log, 'utf8').split('\n'));
    assert.ok(all.has('echarts'), 'report.html rendered without loading echarts?');
    // Issue 51: the run reads back only files it wrote (summary, manifest), which need no schema
    // check: zod never loads, and no history.db goes missing for it.
    assert.ok(!all.has('zod'), 'zod was loaded to check files the run wrote itself');
    assert.ok(existsSync(join(dir, 'history.db')), 'the run was not indexed');
    // Issue 52: the exporters and the OpenTelemetry SDK load only when an --output names them.
    const whole = readFileSync(log, 'utf8').split('\n');
    assert.deepEqual(
      [...all].filter((p) => p.startsWith('@opentelemetry/')),
      [],
    );
    assert.ok(!whole.some((u) => /\/session\/outputs\//.test(u)), 'an exporter was loaded');
  } finally {
    await server.close();
  }
});

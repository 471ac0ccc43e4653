/**
 * Every code block of README.md and docs/*.md is run as written or says why not, on the line
 * before its fence (tools/docs/blocks.ts lists the marks). Shell blocks run page by page, in
 * order, in an empty directory with `infergauge` on the PATH and exit as the docs say; `$URL` and
 * the docs' `http://127.0.0.1:8000` name one simulator started here at ten times its speed (the
 * docs' numbers stay as written: only the wait shrinks). The samples the docs quote are checked
 * against what their commands print now (tools/docs/drift.ts); `npm run docs:samples` rewrites
 * them. Library blocks run from the installed package in test/cli/doc-package.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { type DocBlock, docPages, readBlocks } from '../../tools/docs/blocks.js';
import { sampleDrift } from '../../tools/docs/drift.js';
import { describeFailure, runPage } from '../../tools/docs/run.js';
import { REPO } from '../../tools/repo.js';
import { CLI, tempDir } from '../helpers/cli.js';
import { startSim } from '../helpers/sim.js';

const pages = docPages(REPO).map((page) => ({ page, blocks: readBlocks(REPO, page) }));

test('every block of README.md and docs/*.md is run, or its mark says why not', () => {
  const problems = pages.flatMap(({ blocks }) =>
    blocks.flatMap((b) =>
      b.mark.kind === 'unmarked'
        ? [`${b.page}:${b.line} (${b.lang || 'text'}): ${b.mark.problem}`]
        : [],
    ),
  );
  assert.deepEqual(problems, [], `blocks without a valid mark:\n  ${problems.join('\n  ')}`);
});

test('a sample names a command that a run block of its page runs before it', () => {
  const problems: string[] = [];
  for (const { blocks } of pages) {
    blocks.forEach((b, i) => {
      if (b.mark.kind !== 'output') return;
      const command = b.mark.command.replace(/\s+/g, ' ');
      const earlier = blocks
        .slice(0, i)
        .filter((x) => x.mark.kind === 'run')
        .some((x) =>
          x.code
            .replace(/\\\n\s*/g, ' ')
            .replace(/\s+/g, ' ')
            .includes(command),
        );
      if (!earlier) problems.push(`${b.page}:${b.line}: no run block before it runs "${command}"`);
    });
  }
  assert.deepEqual(problems, []);
});

/** The pages with something to run: shell blocks, or files with a check. */
const runnable = pages.filter(({ blocks }) =>
  blocks.some((b) => b.mark.kind === 'run' || (b.mark.kind === 'file' && b.mark.check)),
);

let sim: SimulatorProcess;

before(async () => {
  sim = await startSim({ 'time-scale': 0.1 });
});

after(async () => {
  await sim?.stop();
});

function samples(blocks: DocBlock[]) {
  return blocks.flatMap((b) => (b.mark.kind === 'output' ? [{ block: b, mark: b.mark }] : []));
}

// The pages at once: most of their time is the simulator's (scaled) waiting.
describe('each page', { concurrency: true }, () => {
  for (const { page, blocks } of runnable) {
    test(`${page}: every shell block exits as documented and every sample still holds`, async (t) => {
      const { outcomes, captured } = await runPage(blocks, {
        dir: tempDir('ig-doc-blocks-'),
        cliArgs: CLI,
        url: sim.url,
      });
      for (const o of outcomes)
        t.diagnostic(`${page}:${o.block.line} ${(o.ms / 1000).toFixed(1)} s`);
      const failed = outcomes.filter((o) => o.exitCode !== o.expected);
      assert.deepEqual(
        failed.map((o) => `${o.block.page}:${o.block.line}`),
        [],
        failed.map(describeFailure).join('\n\n'),
      );
      const drift = samples(blocks).flatMap(({ block, mark }) => {
        const fresh = captured.get(mark.command);
        if (fresh === undefined)
          return [`${page}:${block.line}: "${mark.command}" printed nothing`];
        return sampleDrift(block.code, fresh, mark.exact).map((p) => `${page}:${block.line}: ${p}`);
      });
      assert.deepEqual(
        drift,
        [],
        `stale samples (npm run docs:samples rewrites them):\n  ${drift.join('\n  ')}`,
      );
    });
  }
});

/**
 * `npm run docs:samples [-- PAGE...]`: reruns the commands whose output the docs quote and
 * rewrites the quoted blocks (`<!-- output of: CMD -->`, see tools/docs/blocks.ts) with what they
 * print now. Each page's shell blocks run as a reader runs them (tools/docs/run.ts), against the
 * simulator at its real speed (`infergauge sim`, Llama-3-8B on an H100), so the figures are what
 * a reader sees; virtual-time commands reprint theirs to the digit. A page whose sample run was
 * client-limited (a busy machine) is run again, up to three times. Running it twice changes only
 * figures that move with the machine. test/cli/doc-blocks.test.ts checks the samples for drift.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSimulator } from '../../src/session/simulator.js';
import { REPO } from '../repo.js';
import { type DocBlock, docPages, readBlocks } from './blocks.js';
import { plainOutput } from './drift.js';
import { describeFailure, type PageRun, runPage } from './run.js';

/** The page with each sample block's text replaced (bottom-up, so line numbers hold). */
export function rewriteSamples(
  markdown: string,
  blocks: DocBlock[],
  captured: Map<string, string>,
): { text: string; missing: string[] } {
  const lines = markdown.split('\n');
  const missing: string[] = [];
  for (const block of [...blocks].reverse()) {
    if (block.mark.kind !== 'output') continue;
    const out = captured.get(block.mark.command);
    if (out === undefined) {
      missing.push(`${block.page}:${block.line}: "${block.mark.command}" did not run`);
      continue;
    }
    const sample = plainOutput(out).split('\n').slice(0, block.mark.head);
    lines.splice(block.line, block.endLine - block.line - 1, ...sample);
  }
  return { text: lines.join('\n'), missing };
}

/** A sample shows what a reader's quiet machine prints, not this one's busy moment. */
function clientLimited(blocks: DocBlock[], captured: Map<string, string>): DocBlock[] {
  return blocks.filter(
    (b) => b.mark.kind === 'output' && /^CLIENT-LIMITED/m.test(captured.get(b.mark.command) ?? ''),
  );
}

/** Tries per page when a sample's run was client-limited: the machine, not the code. */
const ATTEMPTS = 3;

async function main(): Promise<void> {
  const asked = process.argv.slice(2);
  const pages = (asked.length > 0 ? asked : docPages(REPO)).filter((page) =>
    readBlocks(REPO, page).some((b) => b.mark.kind === 'output'),
  );
  const sim = await spawnSimulator([]);
  let failed = false;
  try {
    for (const page of pages) {
      const blocks = readBlocks(REPO, page);
      const started = performance.now();
      let best: PageRun | undefined;
      for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
        const dir = mkdtempSync(join(tmpdir(), 'ig-doc-samples-'));
        try {
          const run = await runPage(blocks, {
            dir,
            cliArgs: ['--import', 'tsx', join(REPO, 'src', 'cli', 'main.ts')],
            url: sim.url,
          });
          if (
            !best ||
            clientLimited(blocks, run.captured).length < clientLimited(blocks, best.captured).length
          )
            best = run;
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
        const limited = clientLimited(blocks, best.captured);
        if (limited.length === 0) break;
        for (const b of limited)
          console.error(
            `${page}:${b.line}: the client limited this sample's run (the machine is busy)${attempt < ATTEMPTS ? ': once more' : ': kept; rerun on a quieter machine'}`,
          );
      }
      const { outcomes, captured } = best as PageRun;
      for (const o of outcomes) {
        if (o.exitCode !== o.expected) {
          failed = true;
          console.error(describeFailure(o));
        }
      }
      const path = join(REPO, page);
      const { text, missing } = rewriteSamples(readFileSync(path, 'utf8'), blocks, captured);
      for (const m of missing) console.error(m);
      if (missing.length > 0) failed = true;
      writeFileSync(path, text);
      const n = blocks.filter((b) => b.mark.kind === 'output').length - missing.length;
      const s = ((performance.now() - started) / 1000).toFixed(0);
      console.log(`${page}: ${n} sample(s) rewritten (${s} s)`);
      // What each block took at the simulator's real speed: the durations the docs state.
      for (const o of outcomes)
        console.log(`  ${page}:${o.block.line} ${(o.ms / 1000).toFixed(0)} s`);
    }
  } finally {
    await sim.stop();
  }
  if (failed) process.exitCode = 1;
}

if (import.meta.url === `file://${process.argv[1]}`) await main();

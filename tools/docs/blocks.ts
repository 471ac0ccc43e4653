/**
 * The fenced code blocks of the documentation and what each one promises. Every block says so in
 * the Markdown itself, on the line just before its fence, so that a reader of the source sees it
 * and a new block has to choose (test/cli/doc-blocks.test.ts fails on a block without a mark):
 *
 *   <!-- run -->                   a shell block: every command runs, in order, and exits 0
 *   <!-- run: exit 3 -->           ... and the block exits 3
 *   <!-- library -->               a program: runs as an .mjs file against the installed package
 *   <!-- file: plan.yaml -->       a file the page's later blocks use, written where they run
 *   <!-- file: plan.yaml; check: infergauge plan --print --plan plan.yaml -->
 *                                  ... and a command that must accept it
 *   <!-- output of: infergauge run --url $URL ... -->
 *                                  what that command (a line of an earlier run block of the page)
 *                                  prints: `npm run docs:samples` rewrites it, the test checks it
 *                                  for drift (tools/docs/drift.ts); `; exact` for an output that
 *                                  the same command reproduces to the digit (virtual time),
 *                                  `; head N` for a sample of its first N lines
 *   <!-- not run: needs a GPU server -->
 *                                  with the reason
 */

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export type BlockMark =
  | { kind: 'run'; exitCode: number }
  | { kind: 'library' }
  | { kind: 'file'; name: string; check?: string }
  | { kind: 'output'; command: string; exact: boolean; head?: number }
  | { kind: 'notRun'; reason: string };

export interface DocBlock {
  /** The page, relative to the repository (README.md, docs/cli.md). */
  page: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** 1-based line of the closing fence. */
  endLine: number;
  /** The fence's info string: sh, ts, yaml, or empty. */
  lang: string;
  /** The text between the fences. */
  code: string;
  /** What the block promises, or why its mark could not be read. */
  mark: BlockMark | { kind: 'unmarked'; problem: string };
}

const FENCE = /^```(\S*)\s*$/;
const COMMENT = /^<!--\s*(.*?)\s*-->\s*$/;

/** One mark's text (inside `<!-- -->`), or the problem with it. */
export function parseMark(text: string): BlockMark | { kind: 'unmarked'; problem: string } {
  const m = /^([a-z ]+?)(?::\s*(.*))?$/s.exec(text);
  const word = m?.[1];
  const rest = (m?.[2] ?? '').trim();
  switch (word) {
    case 'run': {
      if (rest === '') return { kind: 'run', exitCode: 0 };
      const exit = /^exit (\d+)$/.exec(rest);
      if (exit) return { kind: 'run', exitCode: Number(exit[1]) };
      return { kind: 'unmarked', problem: `"run: ${rest}": expected "run" or "run: exit N"` };
    }
    case 'library':
      return rest === ''
        ? { kind: 'library' }
        : { kind: 'unmarked', problem: '"library" takes nothing after it' };
    case 'file': {
      const [name = '', ...parts] = rest.split(';').map((s) => s.trim());
      const check = parts
        .find((p) => p.startsWith('check:'))
        ?.slice('check:'.length)
        .trim();
      if (!/^[\w.-]+$/.test(name) || parts.length !== (check === undefined ? 0 : 1))
        return {
          kind: 'unmarked',
          problem: `"file: ${rest}": expected "file: NAME[; check: CMD]"`,
        };
      return check ? { kind: 'file', name, check } : { kind: 'file', name };
    }
    case 'output of': {
      // The command, then options: "exact" (to the digit), "head N" (the first N lines).
      const [command = '', ...options] = rest.split(';').map((x) => x.trim());
      if (command === '') return { kind: 'unmarked', problem: '"output of:" names no command' };
      let exact = false;
      let head: number | undefined;
      for (const option of options) {
        const n = /^head (\d+)$/.exec(option);
        if (option === 'exact') exact = true;
        else if (n) head = Number(n[1]);
        else return { kind: 'unmarked', problem: `"${option}": expected "exact" or "head N"` };
      }
      return head === undefined
        ? { kind: 'output', command, exact }
        : { kind: 'output', command, exact, head };
    }
    case 'not run':
      return rest === ''
        ? { kind: 'unmarked', problem: '"not run" needs its reason: "not run: REASON"' }
        : { kind: 'notRun', reason: rest };
    default:
      return {
        kind: 'unmarked',
        problem: `"<!-- ${text} -->" is no mark (run, library, file, output of, not run)`,
      };
  }
}

/** Every fenced block of a page with the mark on the line before its fence. */
export function parseBlocks(page: string, markdown: string): DocBlock[] {
  const lines = markdown.split('\n');
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i] as string);
    if (!open) continue;
    const close = lines.findIndex((l, j) => j > i && /^```\s*$/.test(l));
    if (close < 0) throw new Error(`${page}:${i + 1}: a code fence that never closes`);
    const before = COMMENT.exec(lines[i - 1] ?? '');
    blocks.push({
      page,
      line: i + 1,
      endLine: close + 1,
      lang: open[1] as string,
      code: lines.slice(i + 1, close).join('\n'),
      mark: before
        ? parseMark(before[1] as string)
        : {
            kind: 'unmarked',
            problem:
              'no mark on the line before the fence (<!-- run -->, <!-- library -->, <!-- file: NAME -->, <!-- output of: CMD -->, <!-- not run: REASON -->)',
          },
    });
    i = close;
  }
  return blocks;
}

/**
 * A shell block's commands one to a line: continuation lines joined, so that a command that a
 * sample quotes can be found whole and its output captured.
 */
export function logicalLines(code: string): string[] {
  const out: string[] = [];
  let pending = '';
  for (const line of code.split('\n')) {
    if (/\\\s*$/.test(line)) {
      pending += `${(pending ? line.trimStart() : line).replace(/\\\s*$/, '').trimEnd()} `;
      continue;
    }
    out.push(pending + (pending ? line.trimStart() : line));
    pending = '';
  }
  if (pending) out.push(pending.trimEnd());
  return out;
}

/** A shell line split into its command and its trailing `# comment` (outside quotes). */
export function splitComment(line: string): { command: string; comment: string } {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = undefined;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1] as string)))
      return { command: line.slice(0, i).trimEnd(), comment: line.slice(i) };
  }
  return { command: line.trimEnd(), comment: '' };
}

/** The pages whose blocks are tested: README.md and every docs/*.md, relative to the repository. */
export function docPages(repo: string): string[] {
  return [
    'README.md',
    ...readdirSync(join(repo, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => `docs/${f}`),
  ];
}

export function readBlocks(repo: string, page: string): DocBlock[] {
  return parseBlocks(page, readFileSync(join(repo, page), 'utf8'));
}

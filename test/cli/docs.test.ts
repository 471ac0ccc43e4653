/**
 * docs/cli.md stays true to the command line: every command and subcommand that `--help`
 * lists has a section (a heading "`infergauge <command>`"), and every long option its own
 * `--help` lists is named in that section. Options are read from the program's help at test time, so a
 * new option fails here until it is documented. A section may say that it takes the options of
 * another command with a link, "options of [`infergauge run`](#infergauge-run)", and then the
 * other section's options count as documented in it (sweep and probe take every run option).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { test } from 'node:test';
import type { Command } from '@commander-js/extra-typings';
import { program } from '../../src/cli/program.js';
import { REPO } from '../../tools/repo.js';

const ROOT = REPO;
const DOCS = resolve(ROOT, 'docs');
const CLI_MD = resolve(DOCS, 'cli.md');

/** What every command has and no page needs to repeat. */
const UNDOCUMENTED = new Set(['--help', '--version']);

interface Help {
  commands: string[];
  options: string[];
}

/** The subcommands and long options of one `--help` text (commander's layout). */
function parseHelp(text: string): Help {
  const block = (title: string): string[] => {
    const lines = text.split('\n');
    const start = lines.indexOf(`${title}:`);
    if (start < 0) return [];
    const end = lines.findIndex((line, i) => i > start && !line.startsWith(' '));
    return lines.slice(start + 1, end < 0 ? undefined : end);
  };
  // An entry starts two spaces in; its wrapped description is indented further.
  const commands = block('Commands')
    .map((line) => /^ {2}([a-z][\w-]*)/.exec(line)?.[1])
    .filter((name): name is string => name !== undefined && name !== 'help');
  const options = block('Options')
    .map((line) => /^ {2}(?:-\w, )?(--[a-z0-9][\w-]*)/.exec(line)?.[1])
    .filter((name): name is string => name !== undefined && !UNDOCUMENTED.has(name));
  return { commands, options };
}

/** The help text `infergauge <path> --help` prints, read from the program itself (no process). */
const root = (await program()) as unknown as Command;

function help(path: string[]): Help {
  let command = root;
  for (const name of path) {
    const sub = command.commands.find((c) => c.name() === name);
    assert.ok(sub, `infergauge ${path.join(' ')}: no such command`);
    command = sub as unknown as Command;
  }
  return parseHelp(command.helpInformation());
}

/** Each command's section of docs/cli.md: from its heading to the next heading as high. */
function sections(markdown: string): Map<string, string> {
  const lines = markdown.split('\n');
  const headings = lines.flatMap((line, i) => {
    const m = /^(#+) /.exec(line);
    return m
      ? [{ i, level: m[1].length, command: /^#+ `infergauge ([^`]+)`/.exec(line)?.[1] }]
      : [];
  });
  const found = new Map<string, string>();
  headings.forEach((h, k) => {
    if (h.command === undefined) return;
    const next = headings.slice(k + 1).find((later) => later.level <= h.level);
    found.set(h.command, lines.slice(h.i, next?.i).join('\n'));
  });
  return found;
}

/** A section's text with the sections it takes options from ("options of [`infergauge X`](#x)"). */
function documentedText(
  all: Map<string, string>,
  command: string,
  seen = new Set<string>(),
): string {
  seen.add(command);
  const own = all.get(command) ?? '';
  const taken = [...own.matchAll(/options? of \[`infergauge ([^`]+)`\]\(#[\w-]+\)/g)]
    .map((m) => m[1])
    .filter((other) => !seen.has(other));
  return [own, ...taken.map((other) => documentedText(all, other, seen))].join('\n');
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens, -1 for repeats. */
function anchors(markdown: string): Set<string> {
  const counts = new Map<string, number>();
  const found = new Set<string>();
  for (const m of markdown.matchAll(/^#+ (.+)$/gm)) {
    const slug = m[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N} _-]/gu, '')
      .replace(/ /g, '-');
    const n = counts.get(slug) ?? 0;
    counts.set(slug, n + 1);
    found.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return found;
}

test('docs/cli.md has a section for every command and names every option its --help lists', () => {
  const markdown = readFileSync(CLI_MD, 'utf8');
  const all = sections(markdown);
  const top = help([]);
  assert.ok(top.commands.includes('run'), 'infergauge --help lists its commands');
  const helps = top.commands.map((c) => ({ path: [c], help: help([c]) }));
  const subs = helps.flatMap(({ path, help: h }) =>
    h.commands.map((s) => ({ path: [...path, s], help: help([...path, s]) })),
  );
  const missing: string[] = [];
  for (const { path, help: h } of [...helps, ...subs]) {
    const command = path.join(' ');
    if (!all.has(command)) {
      missing.push(`no section "\`infergauge ${command}\`" in docs/cli.md`);
      continue;
    }
    const text = documentedText(all, command);
    for (const option of h.options) {
      const named = new RegExp(`(?<![\\w-])${option}(?![\\w-])`);
      if (!named.test(text))
        missing.push(`${option} is missing from the section "infergauge ${command}"`);
    }
  }
  assert.deepEqual(missing, [], `docs/cli.md is behind --help:\n  ${missing.join('\n  ')}`);
});

test('every relative link in README.md and docs/*.md leads to a file and, with #, to a heading', () => {
  const pages = [
    'README.md',
    ...readdirSync(DOCS)
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  const broken: string[] = [];
  for (const page of pages) {
    const path = resolve(ROOT, page);
    const markdown = readFileSync(path, 'utf8');
    for (const [, target] of markdown.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue;
      const [file, anchor] = target.split('#');
      const linked = file === '' ? path : resolve(dirname(path), file);
      if (!existsSync(linked)) broken.push(`${page}: ${target} (no such file)`);
      else if (anchor !== undefined && !anchors(readFileSync(linked, 'utf8')).has(anchor))
        broken.push(`${page}: ${target} (no such heading)`);
    }
  }
  assert.deepEqual(broken, [], `broken links:\n  ${broken.join('\n  ')}`);
});

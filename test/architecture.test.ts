/**
 * The house rules (README, "Source layout"), read from the imports themselves: no import cycle
 * between files or between folders, and each folder imports only the layers beneath it. A change
 * that breaks a layer fails here, naming the file and the import.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { REPO } from '../tools/repo.js';

const SRC = join(REPO, 'src');

/** The leaf modules at the top of src/ (types and small shared helpers); they import nothing. */
const ROOT = '(root)';

/**
 * What each folder may import besides itself and the root's leaf modules. `src/index.ts` is the
 * library's public face and may import anything but the command line; nothing imports it.
 */
const LAYERS: Record<string, readonly string[]> = {
  [ROOT]: [],
  backends: [],
  memory: [],
  metrics: [],
  workload: ['backends'],
  telemetry: ['metrics'],
  loadgen: ['backends', 'metrics', 'workload'],
  sim: ['backends', 'memory', 'workload'],
  plan: ['backends', 'metrics', 'workload'],
  analysis: ['memory', 'metrics', 'telemetry', 'workload'],
  results: ['analysis', 'memory', 'metrics', 'telemetry'],
  report: ['analysis', 'memory', 'metrics', 'results', 'telemetry', 'workload'],
  deploy: ['plan', 'workload', 'backends', 'metrics'],
  session: [
    'analysis',
    'backends',
    'loadgen',
    'memory',
    'metrics',
    'plan',
    'report',
    'results',
    'sim',
    'telemetry',
    'workload',
  ],
};

/** The command line sits on top: it may import every other folder, and nothing imports it. */
const ALLOWED: Record<string, readonly string[]> = {
  ...LAYERS,
  cli: Object.keys(LAYERS).filter((folder) => folder !== ROOT),
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

const IMPORT =
  /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+'(\.[^']+)'|import\(\s*'(\.[^']+)'\s*\)/g;

/** Each file's relative imports, as paths of files under src/. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, 'utf8');
    const targets = [...text.matchAll(IMPORT)].map((m) =>
      relative(SRC, resolve(dirname(file), (m[1] ?? m[2]) as string).replace(/\.js$/, '.ts')),
    );
    graph.set(relative(SRC, file), [...new Set(targets)]);
  }
  return graph;
}

const folderOf = (file: string) => (file.includes('/') ? file.split('/')[0] : ROOT);

/** Strongly connected parts with more than one member (Tarjan): the cycles. */
function cycles(nodes: string[], next: (node: string) => string[]): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let counter = 0;
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of next(v)) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) === index.get(v)) {
      const part: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        onStack.delete(w);
        part.push(w);
      } while (w !== v);
      if (part.length > 1) found.push(part.sort());
    }
  };
  for (const v of nodes) if (!index.has(v)) visit(v);
  return found;
}

const graph = importGraph();
// The public face imports everything by design; it is not part of any layer.
const layered = [...graph.keys()].filter((f) => f !== 'index.ts');

test('every relative import names a file that exists', () => {
  for (const [file, targets] of graph) {
    for (const target of targets) assert.ok(graph.has(target), `${file} imports ${target}`);
  }
});

test('no import cycle between files', () => {
  assert.deepEqual(
    cycles(layered, (f) => graph.get(f) ?? []),
    [],
  );
});

test('no import cycle between folders', () => {
  const folders = new Map<string, Set<string>>();
  for (const file of layered) {
    const from = folderOf(file);
    const to = folders.get(from) ?? new Set<string>();
    for (const target of graph.get(file) ?? [])
      if (folderOf(target) !== from) to.add(folderOf(target));
    folders.set(from, to);
  }
  assert.deepEqual(
    cycles([...folders.keys()], (f) => [...(folders.get(f) ?? [])]),
    [],
  );
});

test('each folder imports only the layers beneath it', () => {
  const broken: string[] = [];
  for (const file of layered) {
    const from = folderOf(file);
    const allowed = ALLOWED[from];
    if (!allowed) {
      broken.push(`${file}: folder ${from}/ has no row in ALLOWED (test/architecture.test.ts)`);
      continue;
    }
    for (const target of graph.get(file) ?? []) {
      const to = folderOf(target);
      if (to === from || (to === ROOT && target !== 'index.ts')) continue;
      if (!allowed.includes(to)) broken.push(`${file} imports ${target}`);
    }
  }
  assert.deepEqual(broken, []);
});

test('nothing imports the command line, nor runs its files (the library needs none of it)', () => {
  const offenders: string[] = [];
  for (const [file, targets] of graph) {
    if (folderOf(file) === 'cli') continue;
    for (const target of targets)
      if (folderOf(target) === 'cli') offenders.push(`${file} imports ${target}`);
    // A path to the command line's entry (a child process started as `main.js sim`) is one too.
    if (/\bcli[/\\]main\b/.test(readFileSync(join(SRC, file), 'utf8'))) {
      offenders.push(`${file} names cli/main`);
    }
  }
  assert.deepEqual(offenders, []);
});

test('only the command line touches argv, exit codes of the process and the terminal', () => {
  const offenders = layered.filter(
    (file) =>
      folderOf(file) !== 'cli' &&
      /process\.(exit|argv)\b|\.isTTY\b/.test(readFileSync(join(SRC, file), 'utf8')),
  );
  assert.deepEqual(offenders, []);
});

/**
 * Prints the simulator against every published point (test/fixtures/sim-validation/points.json):
 * each metric's published and simulated figure and error, then the median absolute errors per
 * set (fit, validation), per personality, per GPU family and per GPU, against the issue's targets.
 *
 *   node --import tsx bench/sim-validation.ts [--points FILE] [--markdown]
 */
import { parseArgs } from 'node:util';
import { findGpuPreset } from '../src/memory/hardware.js';
import {
  type Group,
  groupErrors,
  loadPoints,
  medianAbs,
  POINT_LIMIT,
  type PointResult,
  signedMedian,
  simulatePoint,
  TARGETS,
} from './simValidation.js';

const { values } = parseArgs({
  options: {
    points: { type: 'string', default: 'test/fixtures/sim-validation/points.json' },
    markdown: { type: 'boolean', default: false },
  },
});

const pct = (e: number | undefined) =>
  e === undefined ? '-' : `${e >= 0 ? '+' : ''}${(e * 100).toFixed(1)}%`;
const fmt = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));

const results = loadPoints(values.points as string).map((p) => simulatePoint(p));
const groups: Group[] = ['ttft', 'tpot', 'throughput', 'kvPool'];

if (values.markdown) {
  console.log('| set | point | engine | GPU x TP | load | metric: published / simulated (error) |');
  console.log('|---|---|---|---|---|---|');
} else {
  console.log('set  point  engine  gpu  load  comparisons');
}
for (const r of results) {
  const p = r.point;
  const load = p.load.kind === 'batch1' ? 'batch 1' : `${p.load.kind} ${p.load.value ?? ''}`;
  const where = `${p.hardware.gpu} x${p.hardware.tp}${(p.hardware.dp ?? 1) > 1 ? ` dp${p.hardware.dp}` : ''}`;
  const cells = r.skipped
    ? `skipped: ${r.skipped}`
    : r.refused && p.load.kind !== 'startup'
      ? `REFUSED: ${r.refused}`
      : r.comparisons
          .map((c) => `${c.metric} ${fmt(c.published)} / ${fmt(c.simulated)} (${pct(c.error)})`)
          .join('; ');
  const flag = Object.values(r.groups).some((e) => Math.abs(e) > POINT_LIMIT)
    ? p.knownMiss
      ? ` [known miss: ${p.knownMiss}]`
      : ' [BEYOND 50 %]'
    : '';
  const engine = `${p.engine.personality}${p.engine.version ? ` (${p.engine.name} ${p.engine.version})` : ''}`;
  if (values.markdown) {
    console.log(`| ${p.role} | ${p.id} | ${engine} | ${where} | ${load} | ${cells}${flag} |`);
  } else {
    console.log(`${p.role}  ${p.id}  ${engine}  ${where}  ${load}  ${cells}${flag}`);
  }
}

function summary(label: string, set: PointResult[]): void {
  const cells = groups.flatMap((g) => {
    const errors = groupErrors(set, g);
    if (errors.length === 0) return [];
    const signed = signedMedian(errors);
    return [`${g} ${pct(medianAbs(errors))} (n=${errors.length}, signed ${pct(signed)})`];
  });
  console.log(`${label}: ${cells.join(', ')}`);
}

console.log('\nMedian absolute error (TTFT at light and mid load only):');
const ran = results.filter((r) => !r.skipped);
for (const role of ['fit', 'validation'] as const) {
  summary(
    role,
    ran.filter((r) => r.point.role === role),
  );
}
console.log(
  `targets on the validation set: ${groups.map((g) => `${g} <= ${pct(TARGETS[g])}`).join(', ')}`,
);
const by = (key: (r: PointResult) => string) => {
  const keys = [...new Set(ran.map(key))].sort();
  for (const k of keys) {
    summary(
      `  ${k}`,
      ran.filter((r) => r.point.role === 'validation' && key(r) === k),
    );
  }
};
console.log('validation set per personality:');
by((r) => r.point.engine.personality);
console.log('validation set per GPU family:');
by((r) => findGpuPreset(r.point.hardware.gpu)?.family ?? 'unknown');
console.log('validation set per GPU:');
by((r) => r.point.hardware.gpu);

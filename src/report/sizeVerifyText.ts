/**
 * The terminal view of `size --verify` (size.json `verification`): predicted against measured,
 * whether the SLOs held on the server, and what became of the calibration. Every text that came
 * from the server or a file (messages, paths) goes through terminalSafe.
 */
import { terminalSafe } from './format.js';
import { type Column, terminalTable } from './table.js';

/** What this view reads of a verification (session/sizeVerify.ts SizeVerification). */
export interface VerificationView {
  calibration: string;
  deployment: string;
  chosen: string;
  load: { mode: 'rate'; rate: number } | { mode: 'users'; users: number };
  server: string;
  requests: number;
  figures: {
    metric: string;
    predicted: number | null;
    interval?: { low: number; high: number; level: number };
    measured: number | null;
    error?: number;
    inside?: boolean;
    tolerance?: number;
  }[];
  inside: boolean;
  decidedBy?: { figures: string[]; level: number };
  sloHeld: boolean;
  slo: { metric: string; ok: boolean; message: string }[];
  validity?: { verdict: string; reasons: string[] };
  refitted: boolean;
  addedAsPoint?: boolean;
  refitProblem?: string;
  dir: string;
  error?: string;
}

/** Three significant figures (1000 and over: whole), a missing value as a dash. */
const num = (v: number | null | undefined) =>
  v == null ? '-' : Math.abs(v) >= 1000 ? v.toFixed(0) : String(Number(v.toPrecision(3)));
const pct = (e: number) => {
  const r = Math.round(e * 100);
  return `${r >= 0 ? '+' : ''}${r}%`;
};

export function renderVerification(v: VerificationView): string {
  const load = v.load.mode === 'rate' ? `${num(v.load.rate)} req/s` : `${v.load.users} users`;
  const lines = [
    '',
    `Verified on ${terminalSafe(v.server)}: ${terminalSafe(v.deployment)} at ${load}, ${v.requests} requests`,
    `  ${terminalSafe(v.chosen)}`,
  ];
  if (v.error !== undefined) {
    lines.push(`  the server could not be measured: ${terminalSafe(v.error)}`);
    lines.push(`  Results: ${terminalSafe(v.dir)}`, '');
    return lines.join('\n');
  }
  const columns: Column<VerificationView['figures'][number]>[] = [
    { label: 'figure', align: 'left', value: (f) => f.metric },
    {
      label: 'predicted',
      align: 'right',
      value: (f) =>
        `${num(f.predicted)}${f.interval ? ` (${num(f.interval.low)}-${num(f.interval.high)})` : ''}`,
    },
    { label: 'measured', align: 'right', value: (f) => num(f.measured) },
    { label: 'error', align: 'right', value: (f) => (f.error === undefined ? '-' : pct(f.error)) },
    {
      label: 'verdict',
      align: 'left',
      value: (f) =>
        f.inside === undefined
          ? '-'
          : f.interval
            ? f.inside
              ? 'inside'
              : 'OUTSIDE'
            : `${f.inside ? 'within' : 'OFF BY MORE THAN'} ${Math.round((f.tolerance ?? 0) * 100)}%`,
    },
  ];
  lines.push(
    terminalTable(columns, v.figures)
      .split('\n')
      .map((l) => `  ${l}`)
      .join('\n'),
  );
  const missed = v.slo.filter((s) => !s.ok);
  lines.push(
    v.sloHeld
      ? `  SLOs on the server: hold (${v.slo.map((s) => terminalSafe(s.message)).join('; ')})`
      : `  SLOs on the server: MISSED (${missed.map((s) => terminalSafe(s.message)).join('; ')})`,
  );
  const file = terminalSafe(v.calibration);
  if (v.validity && v.validity.verdict !== 'valid') {
    lines.push(
      `  The measured run is ${v.validity.verdict.toUpperCase()} (${terminalSafe(v.validity.reasons.join(', '))}): see its summary`,
    );
  }
  const judged = v.decidedBy
    ? ` (judged on ${v.decidedBy.figures.join(' and ')}, the medians it is fitted on, each against its ${Math.round(v.decidedBy.level * 100)} % interval; the rest are shown, not judged)`
    : '';
  lines.push(
    v.inside
      ? `  Calibration: the server agrees with the prediction${judged}; the check is recorded in ${file}${v.addedAsPoint ? ', its run added as a point' : ''}`
      : v.refitted
        ? `  Calibration: the server contradicts the prediction${judged}; ${file} was refitted with this run`
        : v.validity?.verdict === 'invalid'
          ? `  Calibration: ${terminalSafe(v.refitProblem ?? 'not refitted')}; the check is recorded in ${file}`
          : `  Calibration: the server contradicts the prediction${judged}; ${terminalSafe(v.refitProblem ?? 'not refitted')}: ${file} now warns of it (calibration_verify_contradicted)`,
  );
  lines.push(`  Results: ${terminalSafe(v.dir)}`, '');
  return lines.join('\n');
}

/**
 * `size`'s prediction intervals (issue 56): how sure each answer on the Pareto front and in the
 * top rows is, from what the calibration's fit left uncertain (src/sim/prediction.ts). Every
 * such row's operating point is run again at the fitted values and at draws of them (the same
 * draws for every row: the rows are compared draw by draw), each as the search ran it, so that
 * a draw differs from the row's figures by the values alone.
 *
 * - Each figure of `at` gets the interval of prediction.ts (the draws' spread mixed with the
 *   figure's residual scatter).
 * - Each SLO gets the chance it holds (probabilityAtMost / probabilityAtLeast over the draws);
 *   the row's `sloChance` is the chance every SLO holds at once: per draw, the chance each
 *   residual falls within its SLOs' margins (SLOs on one fitted metric share its residual;
 *   different metrics' residuals are taken as independent, which is at or below the least of
 *   the SLOs' own chances), their product averaged over the draws. A draw with failed
 *   requests, or without the SLO's figure, misses.
 * - With a confidence C, a row whose sloChance is below C gets replicas until it holds at C (its
 *   cost is then that of those replicas), or is ruled out where --max-dp or a chance that more
 *   replicas no longer raise stop it; the rows are ranked again and the front marked again, and
 *   rows that enter the front or the top rows are checked in turn.
 * - Two rows are told apart when one is better in at least the level's share of the draws:
 *   better is cheaper (cost per hour, then GPUs, as the ranking) while meeting every SLO, or
 *   meeting them where the other does not, or at the same cost a lower p99 TTFT while both meet
 *   them. The residual scatter is taken as shared by the two rows (the same simulator misses
 *   the same way on deployments of one engine): it cancels on the TTFT ratio, and a row misses
 *   where the other meets only by the difference of their margins. Its run-to-run part is not
 *   shared: the TTFT ratio keeps that noise (the scatter's floor, for each row), so two rows a
 *   few per cent apart are not told apart; on the SLO margins it is left out, so rows very
 *   close in margin are told apart a little too readily.
 */
import type { Threshold } from '../analysis/thresholds.js';
import { holds } from '../metrics/catalog.js';
import { sizeRowLabel } from '../report/sizeText.js';
import type { FitKey } from '../sim/calibrationFile.js';
import {
  centralValues,
  drawValues,
  intervalOf,
  MIN_SCATTER,
  normalCdf,
  PREDICTION_LEVEL,
  type PredictionModel,
  probabilityAtLeast,
  probabilityAtMost,
  residualOf,
  studentTCdf,
} from '../sim/prediction.js';
import {
  INTERVAL_FIGURES,
  type SizedDeployment,
  type SizePointMetrics,
  type SizeRowPrediction,
  type SizeSloPrediction,
} from './sizeRows.js';

/** Feasible rows by rank that get intervals beside the Pareto front (`--interval-rows`). */
export const DEFAULT_INTERVAL_ROWS = 5;
/** More replicas that raise the chance of meeting the SLOs by less than this are not worth adding. */
const LEAST_GAIN = 0.005;
/** What size.json says of the predictions (`prediction`). */
export interface SizePredictionSummary {
  level: number;
  draws: number;
  /** Whether the draws follow the fit's covariance or each value's own standard error (older files). */
  covarianceFrom: PredictionModel['covarianceFrom'];
  /** Feasible rows by rank given a prediction beside the front (`--interval-rows`). */
  intervalRows: number;
  /** Rows given a prediction. */
  rows: number;
  /** `--confidence`: rows ranked at the replicas that meet every SLO with this chance. */
  confidence?: number;
  /**
   * The first row of the central ranking, where --confidence moved it: it, its replicas and the
   * chance it held at them.
   */
  centralFirst?: { label: string; dp: number; sloChance: number };
  /** The ranks of the first row and of the top rows it cannot be told apart from. */
  leaders: number[];
  /** The predictions were stopped (Ctrl-C): rows after the stop have none. */
  interrupted?: true;
  /** Virtual runs the predictions made, and their wall time (within the result's). */
  simulations?: number;
  wallS?: number;
}

/** A row's operating point in one draw: `at`'s figures, each SLO's figure, failed requests. */
export interface SizePointOutcome {
  at: SizePointMetrics;
  slo: (number | null)[];
  failedRequests: number;
}

/** What the predictions need of the search (session/size.ts Search). */
export interface SizePredictionHost {
  model: PredictionModel;
  thresholds: readonly Threshold[];
  /** Draws per row (PREDICTION_DRAWS unless asked). */
  draws: number;
  intervalRows: number;
  confidence?: number;
  maxDp: number;
  /**
   * `row` at `dp` replicas with `values` set over its engine's fitted ones, run as the search
   * ran its operating point: the outcome, and the row placed there (its cost and `at`).
   */
  point(
    row: SizedDeployment,
    dp: number,
    values: Partial<Record<FitKey, number>>,
  ): { outcome: SizePointOutcome; placed: SizedDeployment };
  /** Ranks the rows (in place) and marks the Pareto front again. */
  order(rows: SizedDeployment[]): void;
  /** Whether to stop (Ctrl-C); asked between rows, after letting a stop be heard. */
  stopped?: () => boolean;
  /** Told as the predictions begin on `rows` (more) rows, each at `draws` draws. */
  onRows?: (rows: number, draws: number) => void;
}

/** A row's draws as compared: each draw's standardised margin per SLO, and its p99 TTFT. */
interface Analysed {
  prediction: SizeRowPrediction;
  placed: SizedDeployment;
  /** Per draw, per SLO: the margin over the SLO's residual scatter (+-Infinity: sure either way). */
  z: number[][];
  /** Per SLO: the residual it takes and its side (the same for every row). */
  layout: SloResidual[];
  /** The residual's degrees of freedom (prediction.ts: a Student t; absent, a normal). */
  dof?: number;
  ttft: (number | null)[];
}

/**
 * Gives the front and the top rows their predictions (and, with a confidence, the replicas that
 * hold at it), ranks `rows` again where that moved them, and says which top rows the draws
 * cannot tell apart. Mutates the rows.
 */
export async function predictSize(
  rows: SizedDeployment[],
  host: SizePredictionHost,
): Promise<SizePredictionSummary> {
  const draws = host.model.keys.length > 0 ? drawValues(host.model, host.draws) : [];
  const central = centralValues(host.model);
  const firstBefore = rows.find((r) => r.feasible);
  const before = firstBefore ? { label: sizeRowLabel(firstBefore), dp: firstBefore.dp } : undefined;
  const analysed = new Map<SizedDeployment, Analysed>();
  let interrupted = false;
  for (;;) {
    const todo = wanted(rows, host.intervalRows).filter((r) => !analysed.has(r));
    if (todo.length === 0) break;
    host.onRows?.(todo.length, draws.length);
    for (const row of todo) {
      // A row's draws are synchronous: between two, let a stop be heard.
      if (host.stopped) await new Promise((resolve) => setImmediate(resolve));
      if (host.stopped?.()) {
        interrupted = true;
        break;
      }
      let a = analyse(host, row, row.dp, central, draws);
      if (host.confidence !== undefined && a.prediction.sloChance < host.confidence) {
        a = raise(host, row, a, central, draws);
      }
      row.prediction = a.prediction;
      analysed.set(row, a);
    }
    // Only a confidence moves rows: their costs changed, and with them the ranking and front
    // (also where a stop left the rest unpredicted).
    if (host.confidence === undefined) break;
    host.order(rows);
    if (interrupted) break;
  }
  const leaders = distinguish(rows, analysed, host.intervalRows);
  const first = rows.find((r) => r.feasible);
  const moved =
    host.confidence !== undefined &&
    firstBefore !== undefined &&
    before !== undefined &&
    (first !== firstBefore || first.dp !== before.dp);
  return {
    level: PREDICTION_LEVEL,
    draws: draws.length,
    covarianceFrom: host.model.covarianceFrom,
    intervalRows: host.intervalRows,
    rows: analysed.size,
    ...(host.confidence !== undefined ? { confidence: host.confidence } : {}),
    ...(moved
      ? {
          centralFirst: {
            ...before,
            sloChance:
              firstBefore.prediction?.centralSloChance ??
              firstBefore.prediction?.sloChance ??
              Number.NaN,
          },
        }
      : {}),
    leaders,
    ...(interrupted ? { interrupted: true as const } : {}),
  };
}

/** The rows that get a prediction: the Pareto front and the first `top` feasible rows. */
function wanted(rows: readonly SizedDeployment[], top: number): SizedDeployment[] {
  const feasible = rows.filter((r) => r.feasible);
  return feasible.filter((r, i) => i < top || r.pareto === true);
}

/** The row at `dp`, run at the fitted values and at each draw, and read against the SLOs. */
function analyse(
  host: SizePredictionHost,
  row: SizedDeployment,
  dp: number,
  central: Partial<Record<FitKey, number>>,
  draws: readonly Partial<Record<FitKey, number>>[],
): Analysed {
  const { outcome: c, placed } = host.point(row, dp, central);
  // Nothing fitted (every value held): the fitted values are the one draw, the scatter the rest.
  const outcomes = draws.length > 0 ? draws.map((v) => host.point(row, dp, v).outcome) : [c];
  const logRatio = (v: number | null | undefined, at: number | null | undefined) =>
    v != null && at != null && v > 0 && at > 0 ? Math.log(v / at) : undefined;
  const at: SizeRowPrediction['at'] = {};
  for (const f of INTERVAL_FIGURES) {
    const deltas = outcomes.flatMap((o) => logRatio(o.at[f], c.at[f]) ?? []);
    const range = intervalOf(c.at[f], deltas, residualOf(host.model, f));
    if (range) at[f] = range;
  }
  const z = outcomes.map(() => [] as number[]);
  const layout = host.thresholds.map(
    (t, k): SloResidual => ({
      group: residualGroup(t.metric, k),
      upper: t.op === '<' || t.op === '<=',
    }),
  );
  const slos = host.thresholds.map((t, k): SizeSloPrediction => {
    const value = c.slo[k];
    const residual = residualOf(host.model, t.metric);
    const { sigma } = residual;
    const upper = t.op === '<' || t.op === '<=';
    const logScale = t.unit !== 'verdict' && t.limit > 0 && value != null && value > 0;
    outcomes.forEach((o, i) => {
      const v = o.slo[k];
      let m: number;
      if (o.failedRequests > 0 || v == null) m = Number.NEGATIVE_INFINITY;
      else if (logScale && v > 0)
        m = (upper ? Math.log(t.limit / v) : Math.log(v / t.limit)) / sigma;
      else m = holds(v, t.op, t.limit) ? Number.POSITIVE_INFINITY : Number.NEGATIVE_INFINITY;
      z[i].push(m);
    });
    // The draws that have the figure: the mixture's chance, scaled by their share (the others miss).
    const usable = outcomes.filter((o) => o.failedRequests === 0 && o.slo[k] != null);
    let chance: number;
    if (logScale && usable.every((o) => (o.slo[k] as number) > 0)) {
      const deltas = usable.map((o) => Math.log((o.slo[k] as number) / (value as number)));
      const within = upper
        ? probabilityAtMost(value as number, t.limit, deltas, residual)
        : probabilityAtLeast(value as number, t.limit, deltas, residual);
      chance = usable.length > 0 ? (within * usable.length) / outcomes.length : 0;
    } else {
      chance = z.reduce((s, row) => s + (row[k] > 0 ? 1 : 0), 0) / outcomes.length;
    }
    const deltas = outcomes.flatMap((o) => logRatio(o.slo[k], value) ?? []);
    const interval = t.unit === 'verdict' ? undefined : intervalOf(value, deltas, residual);
    return { slo: t.text, value, ...(interval ? { interval } : {}), chance };
  });
  const { dof } = host.model;
  const sloChance = z.reduce((s, row) => s + meets(row, layout, dof), 0) / outcomes.length;
  const tightest = slos.reduce<SizeSloPrediction | undefined>(
    (least, s) => (least === undefined || s.chance < least.chance ? s : least),
    undefined,
  );
  return {
    prediction: {
      level: PREDICTION_LEVEL,
      draws: draws.length,
      at,
      slos,
      sloChance,
      ...(tightest ? { tightest: tightest.slo } : {}),
    },
    placed,
    z,
    layout,
    dof,
    ttft: outcomes.map((o) => o.at.ttftP99Ms),
  };
}

/** An SLO's residual: SLOs of one group share it (one draw of it moves them together). */
interface SloResidual {
  group: string;
  /** An upper limit (`<`): it holds where the residual is under its margin; a lower one, over. */
  upper: boolean;
}

/**
 * The residual an SLO's figure takes, as prediction.ts scatterOf picks its scatter: SLOs on one
 * fitted metric (ttft.p50 and ttft.p99; itl and tpot) share it. The rest (E2E, attainment,
 * goodput) each get their own, taken as independent: their chance together is then lower than
 * if they moved with the others.
 */
function residualGroup(metric: string, k: number): string {
  if (metric.startsWith('ttft')) return 'ttftMs';
  if (metric.startsWith('itl') || metric.startsWith('tpot')) return 'tpotMs';
  if (/tok|throughput|PerS/i.test(metric)) return 'outputTokPerS';
  return `slo ${k}`;
}

/**
 * The chance every SLO holds in one draw: per residual, the chance it falls between its SLOs'
 * margins (under the least upper one, over the least lower one), a Student t of the fit's
 * degrees of freedom as prediction.ts takes it; different residuals taken as independent.
 */
function meets(
  z: readonly number[],
  layout: readonly SloResidual[],
  dof: number | undefined,
): number {
  const margins = new Map<string, { upper: number; lower: number }>();
  z.forEach((m, k) => {
    const { group, upper } = layout[k];
    const g = margins.get(group) ?? {
      upper: Number.POSITIVE_INFINITY,
      lower: Number.POSITIVE_INFINITY,
    };
    if (upper) g.upper = Math.min(g.upper, m);
    else g.lower = Math.min(g.lower, m);
    margins.set(group, g);
  });
  let p = 1;
  for (const g of margins.values()) {
    p *= Math.max(0, residualCdf(g.upper, dof) - residualCdf(-g.lower, dof));
  }
  return p;
}

function residualCdf(m: number, dof: number | undefined): number {
  if (m === Number.POSITIVE_INFINITY) return 1;
  if (m === Number.NEGATIVE_INFINITY) return 0;
  return dof === undefined ? normalCdf(m) : studentTCdf(m, dof);
}

/**
 * Replicas added to a row below the confidence: one, two, four, ... more until one count holds
 * at it, then bisected below that count; ruled out where --max-dp still misses, or where more
 * replicas stopped raising the chance (what misses is then the engine's latency at any load).
 */
function raise(
  host: SizePredictionHost,
  row: SizedDeployment,
  atCentral: Analysed,
  central: Partial<Record<FitKey, number>>,
  draws: readonly Partial<Record<FitKey, number>>[],
): Analysed {
  const want = host.confidence as number;
  const centralDp = row.dp;
  const tried = new Map<number, Analysed>([[centralDp, atCentral]]);
  const at = (dp: number) => {
    let a = tried.get(dp);
    if (!a) {
      a = analyse(host, row, dp, central, draws);
      tried.set(dp, a);
    }
    return a;
  };
  let below = centralDp;
  let holding: number | undefined;
  let stalled = false;
  for (let add = 1; below < host.maxDp; add *= 2) {
    const dp = Math.min(host.maxDp, centralDp + add);
    const chance = at(dp).prediction.sloChance;
    if (chance >= want) {
      holding = dp;
      break;
    }
    if (chance - at(below).prediction.sloChance < LEAST_GAIN) {
      stalled = true;
      below = dp;
      break;
    }
    below = dp;
  }
  if (holding === undefined) {
    const best = Math.max(...[...tried.values()].map((a) => a.prediction.sloChance));
    Object.assign(row, {
      feasible: false,
      reason: `under --confidence ${want}: meets the SLOs with chance ${percent(atCentral.prediction.sloChance)} at ${centralDp} replicas, and at most ${percent(best)} ${stalled ? `with more (at ${below}, more replicas no longer raise it)` : `up to --max-dp ${host.maxDp}`}`,
    });
    delete row.pareto;
    return atCentral;
  }
  while (holding - below > 1) {
    const mid = Math.floor((below + holding) / 2);
    if (at(mid).prediction.sloChance >= want) holding = mid;
    else below = mid;
  }
  const chosen = at(holding);
  Object.assign(row, chosen.placed);
  return {
    ...chosen,
    prediction: {
      ...chosen.prediction,
      centralDp,
      centralSloChance: atCentral.prediction.sloChance,
    },
  };
}

const percent = (p: number) => `${Math.round(p * 100)} %`;

/**
 * Sets each predicted row's `sameAs` (the predicted rows it cannot be told apart from) and
 * returns the ranks of the first row and the top rows it cannot be told apart from.
 */
function distinguish(
  rows: readonly SizedDeployment[],
  analysed: ReadonlyMap<SizedDeployment, Analysed>,
  top: number,
): number[] {
  const ranked = rows
    .map((row, i) => ({ row, rank: i + 1, a: analysed.get(row) }))
    .filter(
      (r): r is { row: SizedDeployment; rank: number; a: Analysed } =>
        r.row.feasible && r.a !== undefined,
    );
  for (const r of ranked) {
    const same = ranked.filter((o) => o !== r && !apart(r.row, r.a, o.row, o.a)).map((o) => o.rank);
    if (r.row.prediction) {
      if (same.length > 0) r.row.prediction.sameAs = same;
      else delete r.row.prediction.sameAs;
    }
  }
  const first = ranked[0];
  if (first?.rank !== 1) return [];
  return [1, ...(first.row.prediction?.sameAs ?? []).filter((rank) => rank <= Math.max(1, top))];
}

/** Whether either row is better than the other in at least the level's share of the draws. */
function apart(ra: SizedDeployment, a: Analysed, rb: SizedDeployment, b: Analysed): boolean {
  return (
    betterShare(ra, a, rb, b) >= PREDICTION_LEVEL || betterShare(rb, b, ra, a) >= PREDICTION_LEVEL
  );
}

/** The share of the draws (with the shared residual scatter) in which row A is better than B. */
export function betterShare(
  ra: Pick<SizedDeployment, 'costPerHour' | 'gpus'>,
  a: Pick<Analysed, 'z' | 'ttft' | 'dof' | 'layout'>,
  rb: Pick<SizedDeployment, 'costPerHour' | 'gpus'>,
  /** Run with the same SLOs (its layout is a's). */
  b: Pick<Analysed, 'z' | 'ttft' | 'layout'>,
): number {
  const ca = ra.costPerHour ?? Number.POSITIVE_INFINITY;
  const cb = rb.costPerHour ?? Number.POSITIVE_INFINITY;
  const cheaper = ca !== cb ? Math.sign(ca - cb) : Math.sign(ra.gpus - rb.gpus);
  const n = Math.min(a.z.length, b.z.length);
  if (n === 0) return 0;
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const pa = meets(a.z[i], a.layout, a.dof);
    // Both meet every SLO where the shared scatter is under both margins.
    const both = meets(
      a.z[i].map((m, k) => Math.min(m, b.z[i][k])),
      a.layout,
      a.dof,
    );
    // The same cost: the faster p99 TTFT, where the two ratios' run-to-run noise (not shared,
    // each at least the scatter's floor) cannot swap them.
    const ta = a.ttft[i];
    const tb = b.ttft[i];
    const faster =
      ta == null || tb == null || !(ta > 0 && tb > 0)
        ? ta != null && tb == null
          ? 1
          : 0
        : normalCdf(Math.log(tb / ta) / (Math.SQRT2 * MIN_SCATTER));
    sum += cheaper < 0 ? pa : cheaper > 0 ? pa - both : pa - both + both * faster;
  }
  return sum / n;
}

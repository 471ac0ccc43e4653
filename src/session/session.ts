/**
 * A session's frame, the same for every command: where its results go, which outputs hear
 * its events, and that they always hear its end, also when it fails.
 */

import { join } from 'node:path';
import { EXIT, UsageError } from '../errors.js';
import { type RunPlan, redactPlan } from '../plan/runPlan.js';
import type { RecordsFormat } from '../record.js';
import { DEFAULT_RESULTS_ROOT } from '../results/layout.js';
import { claimNewDir, newId, type ResultKindName } from '../results/runFiles.js';
import { builtInOutput, type Output, SessionEvents } from './events.js';
import { historyOutput } from './historyOutput.js';
import { htmlOutput } from './htmlOutput.js';
import { resultsOutput } from './resultsOutput.js';
import { type Notify, utcStamp } from './target.js';
import { parseExportTimeoutS } from './userOutputs.js';

/**
 * `infergauge-results/<UTC time>-<label>`: where a session's results go without --out, created
 * here (with a `-2`, `-3` suffix when that second's name is taken) unless `claim` is false (a
 * session that saves nothing). An explicit --out is the user's: one that holds a run is refused
 * where the run is opened.
 */
export function resultsRoot(out: string | undefined, label: string, claim = true): string {
  if (out !== undefined) return out;
  const name = `${utcStamp()}-${label}`;
  return claim ? claimNewDir(DEFAULT_RESULTS_ROOT, name) : join(DEFAULT_RESULTS_ROOT, name);
}

export interface SessionOptions {
  command: string;
  kind: ResultKindName;
  root: string;
  /** A run of one scenario: the root is the point's own directory. */
  rootIsPoint?: boolean;
  /** The effective plan, secrets redacted. */
  plan: unknown;
  /**
   * Where the results go: the results directory (the default), and report.html unless
   * `html` is false. `save: false` writes nothing (a library measuring in memory).
   */
  save?: boolean;
  html?: boolean;
  /** records.jsonl (the default) or records.jsonl.gz (--records-format). */
  recordsFormat?: RecordsFormat;
  /** More outputs: the terminal's progress, the user's own (--export). */
  outputs?: readonly Output[];
  /** How long an output of the user's own may take to finish a point or the session. */
  exportTimeoutS?: number;
  /** The first Ctrl-C: from then on, outputs of the user's own are waited on briefly. */
  stop?: AbortSignal;
  onNotice?: Notify;
}

/** What a command's caller chooses about a session's outputs. */
export interface SessionHooks {
  /** Outputs besides the results directory (a progress line, the user's own). */
  outputs?: readonly Output[];
  /** report.html at the end (default: yes). */
  html?: boolean;
  /** Write the results directory (default: yes). */
  save?: boolean;
  /** Seconds an output of the user's own may take in pointFinished, sessionFinished (default 10). */
  exportTimeoutS?: number;
  /** The first Ctrl-C or SIGTERM. */
  stop?: AbortSignal;
}

/** The SessionOptions fields a caller's hooks set. */
export function sessionOutputs(
  h: SessionHooks,
): Pick<SessionOptions, 'outputs' | 'html' | 'save' | 'exportTimeoutS' | 'stop'> {
  return {
    ...(h.outputs ? { outputs: h.outputs } : {}),
    ...(h.html !== undefined ? { html: h.html } : {}),
    ...(h.save !== undefined ? { save: h.save } : {}),
    ...(h.exportTimeoutS !== undefined ? { exportTimeoutS: h.exportTimeoutS } : {}),
    ...(h.stop ? { stop: h.stop } : {}),
  };
}

/** What a session takes from its run plan: the plan as saved (secrets redacted), how records are written. */
export function fromPlan(plan: RunPlan): Pick<SessionOptions, 'plan' | 'recordsFormat'> {
  return {
    plan: redactPlan(plan),
    ...(plan.recordsFormat ? { recordsFormat: plan.recordsFormat } : {}),
  };
}

/** The session's events with its outputs subscribed; sessionStarted is told. */
function startSession(o: SessionOptions): SessionEvents {
  // A library caller's deadline is checked as the flag is: NaN or 0 would drop every output at once.
  const deadline = parseExportTimeoutS(o.exportTimeoutS);
  if (deadline.problem)
    throw new UsageError([deadline.problem.replace('--export-timeout-s', 'exportTimeoutS')]);
  const save = o.save !== false;
  const events = new SessionEvents(
    {
      id: newId(),
      command: o.command,
      kind: o.kind,
      root: o.root,
      rootIsPoint: o.rootIsPoint ?? false,
      startedAt: new Date().toISOString(),
      plan: o.plan,
    },
    [
      ...(save ? [builtInOutput(resultsOutput(o.recordsFormat))] : []),
      // Before the other outputs: at their sessionFinished report.html is there (the live
      // dashboard turns into it; an exporter may link it).
      ...(save && o.html !== false ? [builtInOutput(htmlOutput(o.onNotice))] : []),
      ...(o.outputs ?? []),
      // Last: the run's own files are written when it indexes them.
      ...(save ? [builtInOutput(historyOutput(o.onNotice))] : []),
    ],
    o.onNotice,
    save,
    {
      ...(o.exportTimeoutS !== undefined ? { exportTimeoutS: o.exportTimeoutS } : {}),
      ...(o.stop ? { stop: o.stop } : {}),
    },
  );
  events.sessionStarted();
  return events;
}

/**
 * Runs `body` as one session: its outputs hear the start, then the end with the body's exit
 * code, or EXIT.failure with the error (which is then thrown on). A required output that failed
 * mid-session (the results directory on a full disk) ends it the same way, with its error.
 */
export async function inSession<T extends { code: number }>(
  o: SessionOptions,
  body: (session: SessionEvents) => Promise<T>,
): Promise<T> {
  const events = startSession(o);
  let result: T;
  try {
    result = await body(events);
  } catch (err) {
    // The body fails on the halt that the failed output caused: that output's error is the cause.
    const cause = events.failure ?? (err as Error);
    await events.sessionFinished(EXIT.failure, cause);
    throw cause;
  }
  if (events.failure) {
    await events.sessionFinished(EXIT.failure, events.failure);
    throw events.failure;
  }
  await events.sessionFinished(result.code);
  return result;
}

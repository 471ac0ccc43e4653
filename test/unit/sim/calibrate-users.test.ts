/**
 * A closed loop replayed user by user (issue 56): each user's own requests, rebuilt from the
 * records' send and end times, at its recorded start and after its own previous end plus the
 * client's turnaround. The "measured" run is the hidden engine in virtual time with users whose
 * turnarounds, starts and lengths differ, written as the client writes a closed loop's records
 * (scheduled as the user's last request ended, sent after its turnaround, no user id).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { RequestRecord } from '../../../src/record.js';
import {
  type CalibrationPoint,
  pointFromRecords,
  rampScatter,
  relativeErrors,
  replayPoint,
  replayRecords,
  userChains,
} from '../../../src/sim/calibrate.js';
import { EngineCluster } from '../../../src/sim/cluster.js';
import { simulateRun } from '../../../src/sim/virtual.js';
import { HIDDEN, l40sEngine, measurePerturbed } from '../../helpers/perturbed.js';

const truth = l40sEngine(HIDDEN);

/** Per user: its first send (ms), its turnaround (ms), its prompt and output lengths. */
const USERS = [
  { startMs: 0, gapMs: 0, input: 2048, output: 24 },
  { startMs: 15, gapMs: 40, input: 256, output: 160 },
  { startMs: 30, gapMs: 120, input: 1024, output: 48 },
  { startMs: 45, gapMs: 5, input: 128, output: 96 },
];
const PER_USER = 10;
const WARMUP_PER_USER = 2;

/** The measured run's records, as the client writes a closed loop's: no user id. */
function measureUsers(
  users: readonly (typeof USERS)[number][] = USERS,
  warmupPerUser = WARMUP_PER_USER,
  perUser = PER_USER,
): RequestRecord[] {
  const records: RequestRecord[] = [];
  simulateRun({
    engine: new EngineCluster(truth),
    load: {
      mode: 'open',
      rate: 1,
      arrival: 'trace',
      trace: { timesMs: users.map((u) => u.startMs), speed: 1 },
    },
    requests: users.length,
    warmupRequests: 0,
    seed: 1,
    endpoint: 'completions',
    nextSession: (u) => {
      const { gapMs, input, output } = users[u];
      let k = 0;
      return {
        next: () =>
          k++ < perUser
            ? {
                pauseMs: k === 1 ? 0 : gapMs,
                requests: [
                  {
                    prompt: '',
                    promptWords: input,
                    requestedInputTokens: input,
                    requestedOutputTokens: output,
                  },
                ],
              }
            : undefined,
      };
    },
    onRecord: (r) => records.push(r),
  });
  // The client scheduled each request as its user's previous one ended, and sent it after its
  // turnaround; it numbered them in that order and kept no user.
  const previousEnd = new Map<number, number>();
  const byTurn = [...records].sort((a, b) => (a.turn as number) - (b.turn as number));
  for (const r of byTurn) {
    r.scheduledAt = previousEnd.get(r.sessionId as number) ?? r.sentAt;
    r.phase = (r.turn as number) <= warmupPerUser ? 'warmup' : 'measure';
    previousEnd.set(r.sessionId as number, r.endAt);
  }
  const sent = records.sort((a, b) => a.scheduledAt - b.scheduledAt || a.sentAt - b.sentAt);
  return sent.map(({ sessionId: _s, turn: _t, sessionDone: _d, ...r }, id) => ({ ...r, id }));
}

const load = { mode: 'closed' as const, concurrency: USERS.length };

describe('calibrate replays a closed loop user by user', () => {
  test("the users are rebuilt from the records' times", () => {
    const records = measureUsers();
    const point = pointFromRecords('users', load, records);
    const users = point.users;
    assert.ok(users, 'users rebuilt');
    assert.equal(users.length, USERS.length);
    assert.equal(
      users.reduce((n, u) => n + u.requests.length, 0),
      USERS.length * PER_USER,
    );
    // Two users whose requests ended in the same step are one state: which goes on as which
    // is moot (the same sends follow the same ends), so each request is checked against the
    // user its lengths name.
    const userOf = (index: number) => {
      const u = USERS.find((x) => x.input === point.requests[index].inputTokens);
      assert.ok(u);
      return u;
    };
    for (const [u, user] of users.entries()) {
      const first = userOf(user.requests[0].index);
      assert.equal(first, USERS[u], `user ${u} comes in the order started`);
      assert.ok(Math.abs(user.startMs - first.startMs) < 0.01, `user ${u} starts ${user.startMs}`);
      for (const [k, { index, gapMs }] of user.requests.entries()) {
        const expected = k === 0 ? 0 : userOf(index).gapMs;
        assert.ok(Math.abs(gapMs - expected) < 0.01, `user ${u} request ${k}: gap ${gapMs}`);
      }
    }
  });

  test('the per-user replay reproduces the run; the idealised loop does not', () => {
    const point = pointFromRecords('users', load, measureUsers());
    const idealised: CalibrationPoint = { ...point, users: undefined };
    const own = relativeErrors(replayPoint(truth, point), point.measured);
    const ideal = relativeErrors(replayPoint(truth, idealised), point.measured);
    const worst = (e: typeof own) =>
      Math.max(Math.abs(e.ttftMs), Math.abs(e.tpotMs), Math.abs(e.outputTokPerS));
    assert.ok(worst(own) < 0.01, `per user: ${JSON.stringify(own)}`);
    assert.ok(worst(ideal) > 0.1, `idealised: ${JSON.stringify(ideal)}`);
    // Warm-up requests still run (they warm the engine) and come back as warm-up.
    const replayed = replayRecords(truth, point, false);
    assert.equal(replayed.length, point.requests.length);
    assert.equal(
      replayed.filter((r) => r.phase === 'warmup').length,
      USERS.length * WARMUP_PER_USER,
    );
    assert.ok(replayed.every((r) => r.sessionId === undefined));
  });

  test("the ramp's scatter: where the server admitted the first requests decides a figure", () => {
    // Four users of four requests of equal lengths sent as the client ramps its connections
    // (the HTTP simulator's concurrency 4: 0.8, 1.2 and 6.4 ms apart): replayed at those starts the first
    // prompt is prefilled alone; started together, the first two share a step, and every later
    // wave repeats the pattern. (Warm-up requests would keep the first waves out of the
    // medians.)
    const ramp = [0, 0.8, 1.2, 6.4].map((startMs) => ({
      startMs,
      gapMs: 0.7,
      input: 1024,
      output: 64,
    }));
    const point = pointFromRecords('ramp', load, measureUsers(ramp, 0, 4));
    const scatter = rampScatter(truth, point);
    assert.ok(scatter && scatter.ttftMs > 0.1, JSON.stringify(scatter));
    // A loop whose users all started at once has no ramp to scatter.
    assert.equal(rampScatter(truth, measurePerturbed(4, 16, 512, 64)), undefined);
  });

  test('hand-made records: a send goes to the user whose last request ended latest before it', () => {
    const r = (scheduledAt: number, sentAt: number, endAt: number) => ({
      scheduledAt,
      sentAt,
      endAt,
    });
    const users = userChains(
      [
        r(0, 1, 50), // user A
        r(0, 3, 80), // user B, started 2 ms later (the connection ramp)
        r(50, 51, 120), // A ended at 50
        r(80, 82, 100), // B ended at 80
        r(100, 100.5, 160), // B again (ended at 100; A's 120 is later than this send)
        r(120, 121, 130), // A again
      ],
      2,
    );
    assert.deepEqual(users, [
      {
        startMs: 1,
        requests: [
          { index: 0, gapMs: 0 },
          { index: 2, gapMs: 1 },
          { index: 5, gapMs: 1 },
        ],
      },
      {
        startMs: 3,
        requests: [
          { index: 1, gapMs: 0 },
          { index: 3, gapMs: 2 },
          { index: 4, gapMs: 0.5 },
        ],
      },
    ]);
  });

  test('records the loop cannot explain keep the idealised loop', () => {
    const r = (scheduledAt: number, sentAt: number, endAt: number) => ({
      scheduledAt,
      sentAt,
      endAt,
    });
    // A third send with both users still busy: no end freed it.
    assert.equal(userChains([r(0, 0, 50), r(0, 0, 60), r(10, 10, 70)], 2), undefined);
    // An older record without its send time.
    const old = { scheduledAt: 0, endAt: 50 } as unknown as RequestRecord;
    assert.equal(userChains([old], 1), undefined);
    // A run with a failed request: its freed slot is not replayed, so neither are the users.
    const records = measureUsers();
    records[5] = { ...records[5], error: { kind: 'timeout', message: 'timed out' } };
    assert.equal(pointFromRecords('failed', load, records).users, undefined);
    // An open loop is replayed at its arrival times, not by users.
    const open = { mode: 'open' as const, rate: 10, arrival: 'poisson' as const };
    assert.equal(pointFromRecords('open', open, measureUsers()).users, undefined);
  });
});

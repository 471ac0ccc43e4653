import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Long enough for the rest of the suite on a slow machine; then the file runs anyway. */
const MAX_WAIT_MS = 60 * 60_000;

/**
 * For a test file whose assertions are about time (a client within a millisecond of the
 * simulator's truth, an event loop that is not held up, a real engine's pace): `npm test`
 * (tools/test/run.ts) runs such files after all the others, one at a time, so that they meet
 * the machine as a user's run does (quiet, or beside whatever else its owner runs), not beside
 * three other test files. Called at the top of the file, before its tests:
 *
 *   await runAlone(import.meta.url);
 *
 * The suite writes whose turn it is to the file named by $INFERGAUGE_TEST_TURN; a file run on
 * its own (`node --import tsx --test <file>`) starts at once.
 */
export async function runAlone(fileUrl: string): Promise<void> {
  const turnPath = process.env.INFERGAUGE_TEST_TURN;
  if (!turnPath) return;
  const self = fileURLToPath(fileUrl);
  const deadline = Date.now() + MAX_WAIT_MS;
  while (readTurn(turnPath) !== self) {
    if (Date.now() > deadline) {
      process.stderr.write(`${self}: no turn to run alone after ${MAX_WAIT_MS / 60_000} min\n`);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function readTurn(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

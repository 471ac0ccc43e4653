/**
 * Whether a sample output quoted in the docs has drifted from what its command prints now.
 *
 * A real-time run's figures move with the machine, so by default a sample is compared by shape:
 * every one of its lines, its figures masked, must appear in the fresh output in the same order,
 * so a label renamed, a line added to the summary's fixed part or removed, a column changed or a
 * line reordered is drift, while 85.97 against 86.40 ms is not. An `exact` sample (virtual time,
 * fixed seed) must match to the digit, but for the seconds the tool itself took ("49.8 s").
 *
 * Lines that come and go with the machine's load, not with the code, are not asked for: the
 * CLIENT-LIMITED headline, the client-health details under its line, and the warnings list; of
 * the client-health and validity lines (a client limit makes a run invalid) only their labels
 * are. Of an interval line only its row's name is: whether a side is open and which method
 * applies (the `*` and its note) follow the samples' correlation, which moves from run to run.
 */

/** Every figure (1,851.1, -65, 0.37) as one mark, so that shapes compare. */
export function maskFigures(line: string): string {
  return line
    .replace(/[-+−]?\d[\d,]*(\.\d+)?/g, '#')
    .replace(/ +/g, ' ')
    .replace(/[─]+/g, '─')
    .trimEnd();
}

/** The tool's own wall time, which no sample can pin. */
function maskSeconds(line: string): string {
  return line.replace(/\d+(\.\d+)? s\b/g, '# s').trimEnd();
}

/** Lines of a summary that the machine's load decides (see the file's comment). */
function volatileLines(lines: string[]): Set<number> {
  const skip = new Set<number>();
  let inWarnings = false;
  let inHealth = false;
  lines.forEach((line, i) => {
    if (line.startsWith('CLIENT-LIMITED')) skip.add(i);
    if (line === 'Warnings:') inWarnings = true;
    else if (inWarnings && !line.startsWith('  ')) inWarnings = false;
    if (line.startsWith('Client health:')) inHealth = true;
    else if (inHealth && !line.startsWith('  ')) inHealth = false;
    else if (inHealth) skip.add(i);
    if (inWarnings) skip.add(i);
    if (line.startsWith('  * samples correlated in time')) skip.add(i);
  });
  return skip;
}

/** A row under the latency table: `  TTFT    p50 103.1 (70.3-105.4), p99 ...`, its name kept. */
const INTERVAL_ROW = /^( {2}\S.*?) +p50 \S+ \(/;

/** Strips colours and trailing blanks: samples are plain text. */
export function plainOutput(text: string): string {
  return (
    text
      // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour codes
      .replace(/\x1b\[[0-9;]*m/g, '')
      .split('\n')
      .map((l) => l.trimEnd())
      .join('\n')
      .replace(/\n+$/, '')
  );
}

/**
 * The problems of a sample against a fresh output, each naming the sample's line (0-based index
 * into the sample) and what is missing; none when it still holds.
 */
export function sampleDrift(sample: string, fresh: string, exact: boolean): string[] {
  // Client health's verdict and its figures are the machine's; that the line is there is not.
  const norm = (line: string) => {
    if (line.startsWith('Client health:')) return 'Client health:';
    if (!exact && line.startsWith('Validity:')) return 'Validity:';
    const interval = INTERVAL_ROW.exec(line);
    if (!exact && interval) return interval[1].trimEnd();
    return exact ? maskSeconds(line) : maskFigures(line);
  };
  const have = plainOutput(fresh).split('\n');
  const haveSkip = volatileLines(have);
  const freshLines = have.filter((_, i) => !haveSkip.has(i)).map(norm);
  const want = plainOutput(sample).split('\n');
  const wantSkip = volatileLines(want);
  const problems: string[] = [];
  if (sample.trim() === '') return ['the sample is empty'];
  let at = 0;
  want.forEach((line, i) => {
    if (wantSkip.has(i)) return;
    const key = norm(line);
    const found = freshLines.indexOf(key, at);
    if (found < 0) {
      const anywhere = freshLines.includes(key);
      problems.push(
        `sample line ${i + 1} ${anywhere ? 'is out of order' : 'is no longer printed'}: ${line.trim()}`,
      );
      return;
    }
    at = found + 1;
  });
  return problems;
}

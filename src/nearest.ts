/**
 * The did-you-mean of every name a user types (plan-file fields, scenario presets): the closest
 * known name by edit distance, when it is close enough to be a typo.
 */

/** The candidate closest to `word`, or undefined when none is within a typo's reach. */
export function nearest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const c of candidates) {
    const d = editDistance(word, c);
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

/** ` (did you mean "x"?)` for a close candidate, else nothing. */
export function didYouMean(word: string, candidates: readonly string[]): string {
  const near = nearest(word, candidates);
  return near ? ` (did you mean "${near}"?)` : '';
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0];
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j];
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length];
}

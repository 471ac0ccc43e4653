/** One sample of the Prometheus text exposition format (0.0.4). */
export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * Parses Prometheus text: comments and `# HELP`/`# TYPE` lines are skipped, histogram and
 * summary series (`_bucket`, `_sum`, `_count`) are kept like any other sample, label values are
 * unescaped, `NaN` and `+Inf`/`-Inf` are numbers, and an optional timestamp is ignored. A line
 * that cannot be read is skipped rather than failing the scrape (servers add odd lines).
 */
export function parsePrometheusText(text: string): MetricSample[] {
  const samples: MetricSample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.length === 0 || line.startsWith('#')) continue;
    const sample = parseLine(line);
    if (sample) samples.push(sample);
  }
  return samples;
}

function parseLine(line: string): MetricSample | undefined {
  let i = 0;
  while (i < line.length && line[i] !== '{' && line[i] !== ' ' && line[i] !== '\t') i++;
  const name = line.slice(0, i);
  if (name.length === 0) return undefined;
  const labels: Record<string, string> = {};
  if (line[i] === '{') {
    i++;
    for (;;) {
      while (line[i] === ' ' || line[i] === ',') i++;
      if (line[i] === '}') {
        i++;
        break;
      }
      const eq = line.indexOf('=', i);
      if (eq < 0 || line[eq + 1] !== '"') return undefined;
      const key = line.slice(i, eq).trim();
      let value = '';
      let j = eq + 2;
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === '\\' && j + 1 < line.length) {
          j++;
          value += line[j] === 'n' ? '\n' : line[j];
        } else value += line[j];
      }
      if (j >= line.length) return undefined;
      // Defined, not assigned: a label named `__proto__` would otherwise set the prototype.
      Object.defineProperty(labels, key, {
        value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
      i = j + 1;
    }
  }
  const rest = line.slice(i).trim().split(/\s+/);
  const value = parseValue(rest[0] ?? '');
  return value === undefined ? undefined : { name, labels, value };
}

function parseValue(text: string): number | undefined {
  if (text === '+Inf' || text === 'Inf') return Number.POSITIVE_INFINITY;
  if (text === '-Inf') return Number.NEGATIVE_INFINITY;
  if (text === 'NaN') return Number.NaN;
  if (text.length === 0) return undefined;
  const value = Number(text);
  return Number.isNaN(value) ? undefined : value;
}

/** `name{a="1",b="2"}` with labels sorted: one stable key per series. */
export function seriesKey(name: string, labels: Record<string, string>): string {
  const keys = Object.keys(labels).sort();
  if (keys.length === 0) return name;
  return `${name}{${keys.map((k) => `${k}=${JSON.stringify(labels[k])}`).join(',')}}`;
}

/** The metric name of a series key. */
export function seriesName(key: string): string {
  const brace = key.indexOf('{');
  return brace < 0 ? key : key.slice(0, brace);
}

import assert from 'node:assert/strict';

/**
 * The exposition format as Prometheus reads it, strictly: every sample's family has one HELP
 * and one TYPE before its samples, counters end in _total, a histogram's buckets rise to a +Inf
 * bucket equal to its _count. Returns the families' types.
 */
export function strictExpositionCheck(text: string): Map<string, string> {
  const types = new Map<string, string>();
  const helps = new Set<string>();
  const buckets = new Map<string, number[]>();
  const counts = new Map<string, number>();
  assert.ok(text.endsWith('\n'), 'the text ends with a line feed');
  for (const line of text.slice(0, -1).split('\n')) {
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta) {
      const [, what, name, rest] = meta;
      if (what === 'HELP') {
        assert.ok(!helps.has(name), `one HELP for ${name}`);
        helps.add(name);
      } else {
        assert.ok(!types.has(name), `one TYPE for ${name}`);
        assert.match(rest, /^(counter|gauge|histogram)$/);
        types.set(name, rest);
      }
      continue;
    }
    const m =
      /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*\})? (\S+)$/.exec(
        line,
      );
    assert.ok(m, `a sample line: ${line}`);
    const [, name, labelText = '', value] = m;
    const family = types.has(name) ? name : name.replace(/_(bucket|sum|count)$/, '');
    const type = types.get(family);
    assert.ok(type && helps.has(family), `${name} comes after its HELP and TYPE`);
    if (type === 'counter') assert.match(family, /_total$/);
    if (type === 'histogram') {
      const series = labelText.replace(/,?le="[^"]*"/, '');
      if (name.endsWith('_bucket')) {
        const list = buckets.get(series + family) ?? [];
        list.push(Number(value === '+Inf' ? Number.NaN : value));
        buckets.set(series + family, list);
        if (/le="\+Inf"/.test(labelText)) counts.set(`${series + family}inf`, Number(value));
      }
      if (name.endsWith('_count')) counts.set(series + family, Number(value));
    }
  }
  for (const [key, list] of buckets) {
    for (let i = 1; i < list.length; i++) assert.ok(list[i] >= list[i - 1], `${key} buckets rise`);
    assert.equal(counts.get(`${key}inf`), counts.get(key), `${key}: +Inf bucket equals _count`);
    assert.equal(list.at(-1), counts.get(key));
  }
  return types;
}

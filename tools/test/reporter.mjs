// A node:test reporter that writes one JSON line per finished test file and per top-level test
// (TimingLine in suite.ts), for the suite's timing summary (run.ts) and the per-file profile
// (profile.ts); the spec reporter stays what people read. Plain JavaScript: node --test loads
// reporters before tsx's loader is registered.
export default async function* timings(source) {
  for await (const event of source) {
    if (event.type !== 'test:complete' || event.data.nesting !== 0) continue;
    const { name, file, details } = event.data;
    if (file === undefined) continue;
    const line = {
      kind: name === file ? 'file' : 'test',
      file,
      name,
      durationS: details.duration_ms / 1000,
      endedAtMs: Date.now(),
      passed: details.passed,
    };
    yield `${JSON.stringify(line)}\n`;
  }
}

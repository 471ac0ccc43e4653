/**
 * Why a text is not JSON, without a byte of it. V8's JSON.parse messages quote the text
 * (`Unexpected token 'r', "root:x:0:0"... is not valid JSON`), and the files read as JSON are
 * sometimes named by another file (a calibration's `--model /etc/shadow`): an error must name
 * the file and where it breaks, never show what it holds.
 */
export function jsonSyntaxProblem(err: unknown, text: string): string {
  const message = err instanceof Error ? err.message : '';
  if (/unexpected end of json input/i.test(message) || text.trim() === '') {
    return text.trim() === '' ? 'not valid JSON: empty' : 'not valid JSON: it ends early';
  }
  const at = /at position (\d+)/.exec(message);
  if (at) {
    const offset = Number(at[1]);
    const before = text.slice(0, offset);
    const line = before.split('\n').length;
    const column = offset - before.lastIndexOf('\n');
    return `not valid JSON at line ${line}, column ${column}`;
  }
  return 'not valid JSON: a character where none belongs';
}

/** JSON.parse, with a SyntaxError's message replaced by jsonSyntaxProblem's. */
export function parseJsonText(text: string): { value: unknown } | { problem: string } {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch (err) {
    return { problem: jsonSyntaxProblem(err, text) };
  }
}

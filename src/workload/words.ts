/**
 * The simulator's documented tokenizer: one token per whitespace-separated word, and its output
 * words. It lives with the workloads (which size prompts with it) so that the simulator and the
 * workloads share it without importing each other.
 */

/** The simulator counts one token per whitespace-separated word (its documented tokenizer). */
export function countWords(text: string): number {
  let count = 0;
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const space = c === 32 || c === 10 || c === 9 || c === 13;
    if (!space && !inWord) count++;
    inWord = !space;
  }
  return count;
}

/** The simulator's output token `i` of a response: one word, " w<i mod 1000>". */
export function simWord(i: number): string {
  return ` w${i % 1000}`;
}

/** `simWord(i).length` without building the string (virtual time writes millions). */
export function simWordLength(i: number): number {
  const k = i % 1000;
  return k < 10 ? 3 : k < 100 ? 4 : 5;
}

/** The words of a text: the simulator's tokens. */
export function splitWords(text: string): string[] {
  return text.split(/[ \n\t\r]+/).filter((w) => w.length > 0);
}

/**
 * The tool schemas as chat templates put them in the prompt: one line per tool, each as
 * `{{ tool | tojson }}` renders it (Hermes-style templates of Qwen2.5/3 and Llama 3.1), which is
 * Python's `json.dumps` with its default `", "` and `": "` separators. The workloads count it
 * and the simulator processes it, so both see the same tokens.
 */
export function toolsPromptText(tools: readonly unknown[]): string {
  return tools.map(templateJson).join('\n');
}

function templateJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(templateJson).join(', ')}]`;
  if (typeof value === 'object' && value !== null) {
    const fields = Object.entries(value).filter(([, v]) => v !== undefined);
    return `{${fields.map(([k, v]) => `${JSON.stringify(k)}: ${templateJson(v)}`).join(', ')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

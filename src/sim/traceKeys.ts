import { MAX_TOKEN_COUNT } from '../backends/timeline.js';

/**
 * Prefix-cache keys for requests known by a trace's block ids (Mooncake's `hash_ids`) rather than
 * by their text, so that virtual time sees the sharing an HTTP replay of the same trace shows.
 *
 * The HTTP replay gives trace block j (of `traceBlockTokens`, B) the server's prompt tokens
 * [jB, (j+1)B), its text a function of its id (the last block cut short). An engine block k (of
 * b tokens) then holds tokens [kb, (k+1)b): two prompts hold the same tokens there exactly when
 * they have the same ids for trace blocks 0..floor(((k+1)b - 1)/B), and the engine keys it only
 * when it is full. The keys below encode exactly that: each distinct chain of ids (an id after
 * the chain before it) is interned as a node with its own range of keys, one per engine block
 * ending inside that trace block. The chain is taken here, not assumed of the ids: Mooncake's
 * README calls them "remapped block hash" and does not say an id names its whole prefix.
 *
 * The HTTP simulator keys the answer's blocks too (the next turn of a chat holds them,
 * physical.ts), and a plain answer's words depend on nothing but their place: the blocks past
 * the prompt (the one holding its end and the answer) are the same for two requests with the
 * same prompt, the same ids and length, and are keyed by that. A prompt longer than its ids
 * cover (an inconsistent trace), and a request without ids, shares nothing: its keys are its own.
 *
 * Keys are small positive integers (what the block pool's maps hash fastest), handed out in
 * order; no other keys may be mixed into the same engine (content hashes share their range).
 */
export class TraceBlockKeys {
  /** Interned chains: "parent node,id" -> node (its first key). */
  private readonly nodes = new Map<string, number>();
  /** Interned whole prompts: "last node,prompt tokens" -> keys of its blocks past the prompt's. */
  private readonly tails = new Map<string, number[]>();
  private next = 1;
  /** Engine blocks that can end inside one trace block: the range each node holds. */
  private readonly span: number;

  constructor(
    /** The engine's KV block size (b). */
    readonly engineBlockTokens: number,
    /** Tokens per trace block (B, `--trace-block-tokens`). */
    readonly traceBlockTokens: number,
  ) {
    if (!(Number.isSafeInteger(engineBlockTokens) && engineBlockTokens >= 1)) {
      throw new Error(`engine block size must be a whole number >= 1 (got ${engineBlockTokens})`);
    }
    if (!(Number.isSafeInteger(traceBlockTokens) && traceBlockTokens >= 1)) {
      throw new Error(`trace block size must be a whole number >= 1 (got ${traceBlockTokens})`);
    }
    // No prompt is longer than MAX_TOKEN_COUNT (the trace reader refuses one), so no more engine
    // blocks than that can end in one of its trace blocks: a larger --trace-block-tokens would
    // hand out keys past 2^53, where distinct keys round to the same number and share blocks.
    this.span = Math.ceil(Math.min(traceBlockTokens, MAX_TOKEN_COUNT) / engineBlockTokens) + 1;
  }

  /**
   * Keys of the full blocks of a request's prompt and answer (`promptTokens + maxTokens`
   * tokens), as SequenceInput.blockHashes takes them.
   */
  keys(hashIds: readonly number[] | undefined, promptTokens: number, maxTokens: number): number[] {
    const b = this.engineBlockTokens;
    const B = this.traceBlockTokens;
    const total = Math.floor((promptTokens + maxTokens) / b);
    const out = new Array<number>(total);
    // A prompt past what the spans hold (no reader lets one through) shares nothing.
    const ids = promptTokens <= MAX_TOKEN_COUNT ? (hashIds ?? []) : [];
    const covered = Math.min(promptTokens, ids.length * B);
    const promptBlocks = Math.min(total, Math.floor(covered / b));
    let node = 0;
    let j = -1;
    let first = 0;
    for (let k = 0; k < promptBlocks; k++) {
      const end = Math.floor(((k + 1) * b - 1) / B);
      while (j < end) {
        j++;
        node = this.node(node, ids[j]);
        // The first engine block whose last token lies in trace block j.
        first = Math.ceil((j * B + 1) / b) - 1;
      }
      out[k] = node + (k - first);
    }
    if (promptBlocks === total) return out;
    if (promptTokens > 0 && covered === promptTokens) {
      // Every prompt token is named by the ids: the blocks past them follow from the prompt.
      const last = Math.floor((promptTokens - 1) / B);
      while (j < last) {
        j++;
        node = this.node(node, ids[j]);
      }
      const key = `${node},${promptTokens}`;
      let tail = this.tails.get(key);
      if (!tail) {
        tail = [];
        this.tails.set(key, tail);
      }
      for (let k = promptBlocks; k < total; k++) {
        const i = k - promptBlocks;
        if (i === tail.length) tail.push(this.next++);
        out[k] = tail[i];
      }
      return out;
    }
    for (let k = promptBlocks; k < total; k++) out[k] = this.next++;
    return out;
  }

  /** Keys handed out so far (distinct cache keys the trace can name). */
  get size(): number {
    return this.next - 1;
  }

  private node(parent: number, id: number): number {
    const key = `${parent},${id}`;
    let node = this.nodes.get(key);
    if (node === undefined) {
      node = this.next;
      this.next += this.span;
      this.nodes.set(key, node);
    }
    return node;
  }
}

/**
 * simulateRun's `prefixKeys` for a trace replay (request `id` is entry `id`), or undefined where
 * no entry has block ids (the prompts' own keys then stand: they share nothing).
 */
export function tracePrefixKeys(
  entries: readonly { hashIds?: readonly number[] }[],
  engineBlockTokens: number,
  traceBlockTokens: number,
):
  | ((id: number, spec: { requestedOutputTokens: number }, promptTokens: number) => number[])
  | undefined {
  if (!entries.some((e) => e.hashIds !== undefined)) return undefined;
  const keys = new TraceBlockKeys(engineBlockTokens, traceBlockTokens);
  return (id, spec, promptTokens) =>
    keys.keys(entries[id]?.hashIds, promptTokens, spec.requestedOutputTokens);
}

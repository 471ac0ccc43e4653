/** The simulator's HTTP plumbing: request bodies in, JSON and OpenAI-style errors out. */
import type { IncomingMessage, ServerResponse } from 'node:http';

const MAX_BODY_BYTES = 32 * 1024 * 1024;

/** The request's body as text; rejects past MAX_BODY_BYTES. */
export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Error(`body over ${MAX_BODY_BYTES} bytes`));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

export function error(res: ServerResponse, status: number, message: string, type: string): void {
  json(res, status, { error: { message, type, code: status } });
}

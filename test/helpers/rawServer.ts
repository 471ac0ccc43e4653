import { createServer, type Socket } from 'node:net';

/**
 * A raw TCP server on port 0 for answers byte by byte: `onRequest` gets the socket once a full
 * request head and its content-length body arrived, with the request's index over all sockets.
 */
export async function rawServer(onRequest: (socket: Socket, index: number) => void) {
  let index = 0;
  let accepted = 0;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buffered = '';
    socket.on('data', (data) => {
      buffered += data.toString('latin1');
      for (;;) {
        const head = buffered.indexOf('\r\n\r\n');
        if (head < 0) return;
        const length = Number(/content-length: *(\d+)/i.exec(buffered.slice(0, head))?.[1] ?? 0);
        if (buffered.length < head + 4 + length) return;
        buffered = buffered.slice(head + 4 + length);
        onRequest(socket, index++);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    /** Requests received so far. */
    requests: () => index,
    /** Connections accepted so far. */
    accepted: () => accepted,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

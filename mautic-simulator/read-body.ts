import type { IncomingMessage } from 'node:http';

/**
 * Reads a request body, but never more than `maxBytes + 1` bytes, so a body over the cap shows as
 * `body.length > maxBytes`. At that point it stops and pauses the request; `complete` is false
 * when bytes were left unread, and the caller should then close that connection. So an oversized
 * body is refused without waiting for the rest. The HTTP front, the Secrets Manager stand-in and
 * the Mautic simulator all read through it.
 *
 * Written here rather than taken from `raw-body`: raw-body refuses an oversized body without
 * handing over what it read, and the HTTP front must give the ingest handler the first
 * `maxBytes + 1` bytes, so that the real handler answers its own 413, as behind API Gateway.
 */
export function readBody(
  req: IncomingMessage,
  maxBytes: number,
): Promise<{ body: Buffer; complete: boolean }> {
  const limit = maxBytes + 1;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (complete: boolean) => {
      req.off('data', onData).off('end', onEnd).off('error', onError);
      resolve({ body: Buffer.concat(chunks, size), complete });
    };
    const onData = (chunk: Buffer) => {
      const room = limit - size;
      if (chunk.length < room) {
        chunks.push(chunk);
        size += chunk.length;
        return;
      }
      chunks.push(chunk.subarray(0, room));
      size = limit;
      req.pause();
      finish(req.complete && chunk.length === room);
    };
    const onEnd = () => finish(true);
    // A client gone mid-body ends here too: Node reports it as an ECONNRESET error.
    const onError = (error: Error) => {
      req.off('data', onData).off('end', onEnd);
      reject(error);
    };
    req.on('data', onData).on('end', onEnd).on('error', onError);
  });
}

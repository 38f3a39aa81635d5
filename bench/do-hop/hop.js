// The hop from an entry Worker to a Durable Object in three shapes, with nothing else in either (run by
// bench/do-hop.mjs). The object answers a push-sized body with a fixed answer of `?reply=N` bytes carrying
// the headers of queen-edge's JSON answers (Content-Type and `CORS_HEADERS` of src/http), as the Broker
// object's `toResponse` does.
//   /forward  the entry passes the client's Request itself: `stub.fetch(request)` (worker/entry.js today)
//   /fresh    the entry passes a new request with the client's method, URL, headers and body stream:
//             `stub.fetch(url, { method, headers, body, redirect })`
//   /rpc      the entry reads the body and calls an RPC method with it; the method returns the answer's
//             bytes and the entry builds the Response
import { DurableObject } from 'cloudflare:workers';

const HEADERS = new Headers({
  'content-type': 'application/json',
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, POST, PUT, DELETE, OPTIONS',
  'access-control-allow-headers': 'Content-Type, Authorization, X-Queen-Broker',
  'access-control-max-age': '86400',
});
const replies = new Map();

/** `n` bytes of answer, made once per size. */
function reply(n) {
  let bytes = replies.get(n);
  if (bytes === undefined) {
    bytes = new TextEncoder().encode('x'.repeat(n));
    replies.set(n, bytes);
  }
  return bytes;
}

const replySize = (url) => Number(new URL(url).searchParams.get('reply') || 0);

export class Hop extends DurableObject {
  fetch(request) {
    if (request.method === 'GET') return new Response('ok');
    const n = replySize(request.url);
    return request.arrayBuffer().then(() => new Response(reply(n).slice(), { status: 201, headers: HEADERS }));
  }

  serve(method, url, _contentType, _body) {
    return { status: 201, body: reply(replySize(url)).slice() };
  }
}

export default {
  fetch(request, env) {
    const stub = env.HOP.get(env.HOP.idFromName('default'));
    const url = request.url;
    const path = new URL(url).pathname;
    if (path === '/fresh') {
      return stub.fetch(url, { method: request.method, headers: request.headers, body: request.body, redirect: 'manual' });
    }
    if (path === '/rpc') {
      return request.arrayBuffer()
        .then((body) => stub.serve(request.method, url, request.headers.get('content-type'), body))
        .then((r) => new Response(r.body, { status: r.status, headers: HEADERS }));
    }
    return stub.fetch(request);
  },
};

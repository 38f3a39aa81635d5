// The hop from an entry Worker to a Durable Object in three shapes, with nothing else in either (run by
// bench/do-hop.mjs). The object answers a push-sized body with a fixed answer of `?reply=N` bytes carrying
// the headers of queen-edge's JSON answers (Content-Type and `CORS_HEADERS` of src/http), as the Broker
// object's `toResponse` does.
//   /forward  the entry passes the client's Request itself: `stub.fetch(request)` (worker/entry.js today)
//   /fresh    the entry passes a new request with the client's method, URL, headers and body stream:
//             `stub.fetch(url, { method, headers, body, redirect })`
//   /rpc      the entry reads the body and calls an RPC method with it; the method returns the answer's
//             bytes and the entry builds the Response
//   /coalesce requests that arrive while a hop is in flight wait, and go together in the next hop (one
//             `POST /__multi` carrying several), made in the context of the group's first request; each other
//             request's Response is built in its own context from its part of the answer (docs/decisions.md,
//             "Hop grouping, tried (session 33)"); `GET /stats` counts direct hops, groups and their members
//   /local    no hop: the entry reads the body and answers itself (what the hop adds, by difference)
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
    if (request.url.endsWith('/__multi')) return request.arrayBuffer().then((b) => this.multi(new Uint8Array(b)));
    const n = replySize(request.url);
    return request.arrayBuffer().then(() => new Response(reply(n).slice(), { status: 201, headers: HEADERS }));
  }

  /** Answers each request of a group as `fetch` would: status (2 bytes), length (4), body, each. */
  multi(bytes) {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const answers = [];
    let at = 0;
    let size = 0;
    while (at < bytes.length) {
      const urlLength = view.getUint32(at, true);
      const url = new TextDecoder().decode(bytes.subarray(at + 4, at + 4 + urlLength));
      at += 4 + urlLength;
      at += 4 + view.getUint32(at, true);
      const body = reply(replySize(url));
      answers.push(body);
      size += 6 + body.length;
    }
    const out = new Uint8Array(size);
    const outView = new DataView(out.buffer);
    let o = 0;
    for (const body of answers) {
      outView.setUint16(o, 201, true); outView.setUint32(o + 2, body.length, true); out.set(body, o + 6); o += 6 + body.length;
    }
    return new Response(out);
  }

  serve(method, url, _contentType, _body) {
    return { status: 201, body: reply(replySize(url)).slice() };
  }
}

// /coalesce (see above): at most MAX_IN_FLIGHT hops at once.
const MAX_IN_FLIGHT = 1;
let inFlight = 0;
let waiting = [];
const stats = { direct: 0, groups: 0, members: 0 };
const encoder = new TextEncoder();

function settleGroup() {
  if (inFlight >= MAX_IN_FLIGHT || waiting.length === 0) return;
  const group = waiting;
  waiting = [];
  stats.groups++; stats.members += group.length;
  inFlight++;
  group[0].settle({ group });
}

function direct(stub, request) {
  inFlight++;
  stats.direct++;
  return stub.fetch(request).then((r) => { inFlight--; settleGroup(); return r; },
    (e) => { inFlight--; settleGroup(); throw e; });
}

function encodeGroup(group) {
  let size = 0;
  const urls = group.map((m) => encoder.encode(m.url));
  for (let i = 0; i < group.length; i++) size += 8 + urls[i].length + group[i].body.length;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  let at = 0;
  for (let i = 0; i < group.length; i++) {
    view.setUint32(at, urls[i].length, true); out.set(urls[i], at + 4); at += 4 + urls[i].length;
    view.setUint32(at, group[i].body.length, true); out.set(group[i].body, at + 4); at += 4 + group[i].body.length;
  }
  return out;
}

function decodeParts(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const parts = [];
  let at = 0;
  while (at < bytes.length) {
    const status = view.getUint16(at, true);
    const length = view.getUint32(at + 2, true);
    parts.push({ status, body: bytes.subarray(at + 6, at + 6 + length) });
    at += 6 + length;
  }
  return parts;
}

function runGroup(env, group) {
  const stub = env.HOP.get(env.HOP.idFromName('default'));
  return stub.fetch('https://hop/__multi', { method: 'POST', body: encodeGroup(group) })
    .then((r) => r.arrayBuffer())
    .then((buffer) => {
      inFlight--;
      settleGroup();
      const parts = decodeParts(new Uint8Array(buffer));
      for (let i = 1; i < group.length; i++) group[i].settle({ part: parts[i] });
      return toResponse(parts[0]);
    }, (e) => {
      inFlight--;
      settleGroup();
      for (let i = 1; i < group.length; i++) group[i].fail(e);
      throw e;
    });
}

const toResponse = (part) => new Response(part.body, { status: part.status, headers: HEADERS });

function coalesce(env, request) {
  if (inFlight < MAX_IN_FLIGHT && waiting.length === 0) return direct(env.HOP.get(env.HOP.idFromName('default')), request);
  const url = request.url;
  return request.arrayBuffer().then((body) => new Promise((resolve, reject) => {
    waiting.push({ url, body: new Uint8Array(body), settle: resolve, fail: reject });
    settleGroup();
  })).then((outcome) => (outcome.group ? runGroup(env, outcome.group) : toResponse(outcome.part)));
}

export default {
  fetch(request, env) {
    const stub = env.HOP.get(env.HOP.idFromName('default'));
    const url = request.url;
    const path = new URL(url).pathname;
    if (path === '/coalesce') return coalesce(env, request);
    if (path === '/local') return request.arrayBuffer().then(() => new Response(reply(replySize(url)).slice(), { status: 201, headers: HEADERS }));
    if (path === '/stats') return new Response(JSON.stringify(stats));
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

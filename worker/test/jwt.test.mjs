// JWT authentication (contract §1.12) in real workerd: tokens minted here with node's crypto (HS256 with a
// secret, RS256 and EdDSA with generated key pairs whose public key PEM is passed as a var, RS256 through a
// JWKS served by a tiny local http server), verified by the Worker through Web Crypto. Valid tokens get 200,
// expired / wrong-audience / wrong-issuer / wrong-signature / malformed / alg-none tokens 401 with a reason, a
// too-low role 403; the token's `sub` comes back as `producerSub` on a popped message; static tokens keep
// working beside JWT; a misconfiguration answers 503 with the reason.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, generateKeyPairSync, sign as cryptoSign, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { startWorker, tempPersistDir, getJson } from './harness.mjs';

const state = tempPersistDir();
after(() => state.cleanup());

const SECRET = 'jwt-test-secret-0123456789';
const ISSUER = 'https://issuer.test';
const AUDIENCE = 'queen-edge';
const b64url = (buf) => Buffer.from(buf).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);

const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const rsaOther = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ed = generateKeyPairSync('ed25519');
const pem = (k) => k.publicKey.export({ type: 'spki', format: 'pem' });

/** A compact JWS. `key`: a secret string (HS256), a KeyObject (RS256, EdDSA) or null (alg none). */
function mint(claims, { alg = 'HS256', key = SECRET, kid, header = {} } = {}) {
  const h = b64url(JSON.stringify({ alg, typ: 'JWT', ...(kid ? { kid } : {}), ...header }));
  const p = b64url(JSON.stringify(claims));
  const input = `${h}.${p}`;
  let sig;
  if (alg === 'none') sig = Buffer.alloc(0);
  else if (alg === 'HS256') sig = createHmac('sha256', key).update(input).digest();
  else if (alg === 'RS256') sig = cryptoSign('sha256', Buffer.from(input), key);
  else if (alg === 'EdDSA') sig = cryptoSign(null, Buffer.from(input), key);
  return `${input}.${b64url(sig)}`;
}

const claims = (over = {}) => ({
  sub: 'alice', iss: ISSUER, aud: AUDIENCE, iat: now(), exp: now() + 300, role: 'read-write', ...over,
});

const post = (url, body, token) => getJson(url, {
  method: 'POST',
  headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
  body: JSON.stringify(body),
});
const get = (url, token) => getJson(url, { headers: token ? { Authorization: `Bearer ${token}` } : {} });

// A JWKS server on a free port: the RSA key under kid "k1" (and "k2" once `rotate` is set).
let jwksHits = 0;
let rotate = false;
const jwks = createServer((req, res) => {
  jwksHits += 1;
  const keys = [{ ...rsa.publicKey.export({ format: 'jwk' }), kid: 'k1', alg: 'RS256', use: 'sig' }];
  if (rotate) keys.push({ ...rsaOther.publicKey.export({ format: 'jwk' }), kid: 'k2', alg: 'RS256', use: 'sig' });
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ keys }));
});
before(() => new Promise((resolve) => jwks.listen(0, '127.0.0.1', resolve)));
after(() => new Promise((resolve) => jwks.close(resolve)));

const BASE = { JWT_ENABLED: 'true', JWT_ISSUER: ISSUER, JWT_AUDIENCE: AUDIENCE };

test('HS256: valid 200, each bad token 401 with its reason, low role 403, sub stamped as producerSub', async () => {
  const w = await startWorker({
    persistTo: state.dir,
    vars: { ...BASE, JWT_ALGORITHM: 'HS256', JWT_SECRET: SECRET, API_TOKEN_READ_ONLY: 'static-ro' },
  });
  try {
    const queue = `jwt-${randomUUID().slice(0, 8)}`;
    const good = mint(claims());
    const pushed = await post(`${w.url}/api/v1/push`, {
      items: [{ queue, payload: { n: 1 }, producerSub: 'mallory' }],
    }, good);
    assert.ok([200, 201].includes(pushed.status), `push: ${pushed.status} ${JSON.stringify(pushed.body)}`);

    const popped = await get(`${w.url}/api/v1/pop/queue/${queue}?batch=1&wait=false`, good);
    assert.equal(popped.status, 200, JSON.stringify(popped.body));
    assert.equal(popped.body.messages[0].producerSub, 'alice', 'sub from the token, not the body');

    const cases = [
      ['no token', undefined, /Authentication required/],
      ['expired', mint(claims({ exp: now() - 3600 })), /expired/i],
      ['not yet valid', mint(claims({ nbf: now() + 3600 })), /not yet valid/i],
      ['wrong audience', mint(claims({ aud: 'someone-else' })), /audience/i],
      ['wrong issuer', mint(claims({ iss: 'https://evil.test' })), /issuer/i],
      ['wrong signature', mint(claims(), { key: 'not-the-secret' }), /signature/i],
      ['tampered payload', (() => {
        const [h, , s] = good.split('.');
        return `${h}.${b64url(JSON.stringify(claims({ role: 'admin' })))}.${s}`;
      })(), /signature/i],
      ['alg none', mint(claims({ role: 'admin' }), { alg: 'none' }), /alg none/i],
      ['alg none, no signature part', mint(claims(), { alg: 'none' }).replace(/\.$/, ''), /Malformed|alg none/i],
      ['RS256 when only HS256 is configured', mint(claims(), { alg: 'RS256', key: rsa.privateKey }), /not accepted/],
      ['malformed', 'abc.def', /Malformed/],
      ['garbage base64', '!!!.???.###', /Malformed/],
    ];
    for (const [name, token, reason] of cases) {
      const r = await get(`${w.url}/api/v1/resources/queues`, token);
      assert.equal(r.status, 401, `${name}: ${r.status} ${JSON.stringify(r.body)}`);
      assert.match(r.body.error, reason, `${name}: ${r.body.error}`);
      // The DELETE route (admin) is refused the same way (at the entry, before any object).
    }

    // Valid token, role too low.
    const ro = mint(claims({ role: 'read-only' }));
    assert.equal((await get(`${w.url}/api/v1/resources/queues`, ro)).status, 200);
    const low = await post(`${w.url}/api/v1/push`, { items: [{ queue, payload: {} }] }, ro);
    assert.equal(low.status, 403, JSON.stringify(low.body));
    assert.equal(low.body.error, 'Insufficient permissions');
    const noRole = mint(claims({ role: undefined }));
    assert.equal((await get(`${w.url}/api/v1/resources/queues`, noRole)).status, 403);
    const rwDelete = await getJson(`${w.url}/api/v1/resources/queues/${queue}`, {
      method: 'DELETE', headers: { Authorization: `Bearer ${good}` },
    });
    assert.equal(rwDelete.status, 403, JSON.stringify(rwDelete.body));
    const admin = mint(claims({ role: undefined, roles: ['read-only', 'admin'] }));
    const adminDelete = await getJson(`${w.url}/api/v1/resources/queues/${queue}`, {
      method: 'DELETE', headers: { Authorization: `Bearer ${admin}` },
    });
    assert.equal(adminDelete.status, 200, JSON.stringify(adminDelete.body));

    // Static tokens keep working beside JWT; skip paths stay public.
    assert.equal((await get(`${w.url}/api/v1/resources/queues`, 'static-ro')).status, 200);
    assert.equal((await get(`${w.url}/api/v1/resources/queues`, 'static-wrong')).status, 401);
    assert.equal((await get(`${w.url}/health`)).status, 200);
  } finally {
    await w.stop();
  }
});

test('RS256 and EdDSA with JWT_PUBLIC_KEY (auto picks the algorithm from the key)', async () => {
  for (const [alg, pair, other] of [['RS256', rsa, rsaOther], ['EdDSA', ed, generateKeyPairSync('ed25519')]]) {
    const w = await startWorker({
      persistTo: state.dir,
      // The PEM as one line with \n escapes (what a single-line variable holds) for RS256, raw for EdDSA.
      vars: { ...BASE, JWT_ALGORITHM: 'auto', JWT_PUBLIC_KEY: alg === 'RS256' ? pem(pair).replace(/\n/g, '\\n') : pem(pair) },
    });
    try {
      const queue = `jwt-${alg}-${randomUUID().slice(0, 8)}`;
      const good = mint(claims({ sub: `sub-${alg}` }), { alg, key: pair.privateKey });
      const pushed = await post(`${w.url}/api/v1/push`, { items: [{ queue, payload: { alg } }] }, good);
      assert.ok([200, 201].includes(pushed.status), `${alg} push: ${pushed.status} ${JSON.stringify(pushed.body)}`);
      const popped = await get(`${w.url}/api/v1/pop/queue/${queue}?batch=1&wait=false`, good);
      assert.equal(popped.status, 200, JSON.stringify(popped.body));
      assert.equal(popped.body.messages[0].producerSub, `sub-${alg}`);

      const bad = [
        ['signed by another key', mint(claims(), { alg, key: other.privateKey }), /signature/i],
        ['expired', mint(claims({ exp: now() - 3600 }), { alg, key: pair.privateKey }), /expired/i],
        ['wrong audience', mint(claims({ aud: 'x' }), { alg, key: pair.privateKey }), /audience/i],
        ['alg none', mint(claims(), { alg: 'none' }), /alg none/i],
        // The public key must never work as an HMAC secret (algorithm confusion).
        ['HS256 with the public key as secret', mint(claims(), { alg: 'HS256', key: pem(pair) }), /not accepted/],
      ];
      for (const [name, token, reason] of bad) {
        const r = await get(`${w.url}/api/v1/resources/queues`, token);
        assert.equal(r.status, 401, `${alg} ${name}: ${r.status} ${JSON.stringify(r.body)}`);
        assert.match(r.body.error, reason, `${alg} ${name}: ${r.body.error}`);
      }
      const ro = mint(claims({ role: 'read-only' }), { alg, key: pair.privateKey });
      assert.equal((await post(`${w.url}/api/v1/push`, { items: [{ queue, payload: {} }] }, ro)).status, 403);
    } finally {
      await w.stop();
    }
  }
});

test('RS256 through JWT_JWKS_URL: cached, refetched on an unknown kid', async () => {
  const url = `http://127.0.0.1:${jwks.address().port}/.well-known/jwks.json`;
  const w = await startWorker({ persistTo: state.dir, vars: { ...BASE, JWT_ALGORITHM: 'RS256', JWT_JWKS_URL: url }, runtime: 'wrangler' });
  try {
    const good = mint(claims(), { alg: 'RS256', key: rsa.privateKey, kid: 'k1' });
    const first = await get(`${w.url}/api/v1/resources/queues`, good);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.ok(jwksHits >= 1);
    const forged = mint(claims(), { alg: 'RS256', key: rsaOther.privateKey, kid: 'k1' });
    const r = await get(`${w.url}/api/v1/resources/queues`, forged);
    assert.equal(r.status, 401);
    assert.match(r.body.error, /signature/i);

    // A key added to the JWKS later is found by a refetch (after the minimum refresh interval of 5 s).
    rotate = true;
    await new Promise((res) => setTimeout(res, 5_500));
    const rotated = mint(claims(), { alg: 'RS256', key: rsaOther.privateKey, kid: 'k2' });
    const ok = await get(`${w.url}/api/v1/resources/queues`, rotated);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));

    // Unknown kids do not make the broker hammer the key server.
    const hits = jwksHits;
    for (let i = 0; i < 5; i++) {
      const unknown = mint(claims(), { alg: 'RS256', key: rsa.privateKey, kid: `nope-${i}` });
      const u = await get(`${w.url}/api/v1/resources/queues`, unknown);
      assert.equal(u.status, 401, JSON.stringify(u.body));
    }
    assert.ok(jwksHits - hits <= 2, `JWKS fetched ${jwksHits - hits} times for 5 unknown kids`);
  } finally {
    await w.stop();
  }
});

test('misconfiguration answers 503 with the reason, never open', async () => {
  const configs = [
    [{ JWT_ENABLED: 'true' }, /no key/],
    [{ JWT_ENABLED: 'true', JWT_ALGORITHM: 'HS512', JWT_SECRET: SECRET }, /HS512/],
    [{ JWT_ENABLED: 'true', JWT_PUBLIC_KEY: '-----BEGIN PUBLIC KEY-----\nnot base64!\n-----END PUBLIC KEY-----' }, /JWT_PUBLIC_KEY/],
    // Decodes as base64 and looks like an RSA SPKI, but Web Crypto refuses it.
    [{ JWT_ENABLED: 'true', JWT_PUBLIC_KEY: `-----BEGIN PUBLIC KEY-----\n${Buffer.concat([
      Buffer.from('300d06092a864886f70d0101010500', 'hex'), Buffer.from('0300', 'hex')]).toString('base64')}\n-----END PUBLIC KEY-----` }, /JWT_PUBLIC_KEY/],
  ];
  for (const [vars, reason] of configs) {
    const w = await startWorker({ persistTo: state.dir, vars });
    try {
      const token = mint(claims(), { alg: 'RS256', key: rsa.privateKey });
      const r = await get(`${w.url}/api/v1/resources/queues`, token);
      assert.equal(r.status, 503, `${JSON.stringify(vars)}: ${r.status} ${JSON.stringify(r.body)}`);
      assert.match(r.body.error, reason, r.body.error);
      const none = await get(`${w.url}/api/v1/resources/queues`);
      assert.notEqual(none.status, 200, 'never open');
      assert.equal((await get(`${w.url}/health`)).status, 200);
    } finally {
      await w.stop();
    }
  }
});

// What the worker benchmarks share: a keep-alive HTTP client for a local port and the CPU time of a process.
import http from 'node:http';
import { readFileSync, readdirSync } from 'node:fs';

/**
 * A request function over `connections` keep-alive sockets to 127.0.0.1:
 * `request(port, method, path, body)` resolves to `{ status, body }` (body as text); `request.close()` ends
 * the sockets.
 */
export function requester(connections) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections, maxFreeSockets: connections });
  const request = (port, method, path, body) =>
    new Promise((resolve, reject) => {
      const headers = body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {};
      const req = http.request({ host: '127.0.0.1', port, method, path, agent, headers }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  request.close = () => agent.destroy();
  return request;
}

/** CPU time (ns) of process `pid`, all its threads, from /proc/PID/task/TID/schedstat. */
export function cpuNs(pid) {
  let total = 0;
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try { total += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]); } catch { /* gone */ }
  }
  return total;
}

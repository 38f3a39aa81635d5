// The consumer simulator: N consumers on one queue and group, each looping pop -> hold for the handling
// time -> ack every message `completed`, or `failed` with the chosen failure rate (or, in "crash" mode,
// no ack at all so the lease runs out). It only uses the Queen HTTP routes, through conn.request.
import { sleep } from './dom.js';
import { leaseHolders } from './state.js';

const enc = encodeURIComponent;

/**
 * @typedef {{queue: string, group: string, consumers: number, batch: number, handlingMs: number,
 *   failureRate: number, failMode: 'failed'|'crash', fromOldest: boolean, leaseSeconds: number}} SimConfig
 */

export class Simulator {
  /** @param {() => {request: Function}|null} getConn  @param {() => void} onChange */
  constructor(getConn, onChange, leaseSecondsOf = () => null) {
    this.getConn = getConn;
    this.leaseSecondsOf = leaseSecondsOf;
    this.onChange = onChange;
    this.consumers = [];
    this.log = [];
    this.running = false;
    this.abort = null;
    this.config = null;
    this.totals = { delivered: 0, completed: 0, failed: 0, crashed: 0, deadLettered: 0, refused: 0 };
  }

  /** @param {SimConfig} config */
  start(config) {
    if (this.running) this.stop();
    this.config = config;
    this.running = true;
    this.abort = new AbortController();
    this.totals = { delivered: 0, completed: 0, failed: 0, crashed: 0, deadLettered: 0, refused: 0 };
    this.consumers = Array.from({ length: config.consumers }, (_, i) => ({
      id: i + 1, state: 'starting', detail: '', leaseId: null, leaseUntil: null,
      delivered: 0, completed: 0, failed: 0, crashed: 0, deadLettered: 0,
    }));
    this.note(`Started ${config.consumers} consumer${config.consumers === 1 ? '' : 's'} on “${config.queue}”` +
      ` (${config.group ? `group “${config.group}”` : 'queue mode'}), batch ${config.batch}, ${config.handlingMs} ms each, ` +
      `${Math.round(config.failureRate * 100)}% ${config.failMode === 'crash' ? 'crashes' : 'failures'}.`);
    for (const c of this.consumers) this.loop(c, this.abort.signal);
    this.onChange();
  }

  stop() {
    if (!this.running) return;
    this.running = false;
    this.abort.abort();
    for (const c of this.consumers) {
      if (c.state !== 'stopped') c.state = 'stopped';
      c.detail = c.leaseId ? 'stopped; its lease stays until it expires' : '';
    }
    this.note('Stopped. Batches in hand were not acked; their leases run out.');
    this.onChange();
  }

  note(text) {
    this.log.unshift({ at: new Date(), text });
    this.log.length = Math.min(this.log.length, 60);
  }

  set(c, state, detail = '') {
    c.state = state;
    c.detail = detail;
    this.onChange();
  }

  async loop(c, signal) {
    const cfg = this.config;
    const totals = this.totals; // this run's totals: a restart must not mix runs
    const params = new URLSearchParams({ batch: String(cfg.batch), wait: 'false' });
    if (cfg.group) params.set('consumerGroup', cfg.group);
    if (cfg.group && cfg.fromOldest) params.set('subscriptionMode', 'all');
    if (cfg.leaseSeconds > 0) params.set('leaseSeconds', String(cfg.leaseSeconds));
    const popPath = `/api/v1/pop/queue/${enc(cfg.queue)}?${params}`;
    let idleMs = 250;
    while (!signal.aborted) {
      const conn = this.getConn();
      if (!conn) break;
      this.set(c, 'polling');
      let res;
      try {
        res = await conn.request('GET', popPath);
      } catch (e) {
        this.set(c, 'error', e.message);
        this.note(`Consumer ${c.id}: ${e.message}`);
        await sleep(2000, signal);
        continue;
      }
      if (signal.aborted) break;
      const msgs = res.status === 200 ? res.body?.messages || [] : [];
      if (!msgs.length) {
        this.set(c, 'idle', 'nothing to take');
        await sleep(idleMs, signal);
        idleMs = Math.min(1000, idleMs * 1.5);
        continue;
      }
      idleMs = 250;
      const leaseId = res.body.leaseId || msgs[0].leaseId;
      c.leaseId = leaseId;
      leaseHolders.set(leaseId, `simulated consumer ${c.id}`);
      if (leaseHolders.size > 500) leaseHolders.delete(leaseHolders.keys().next().value);
      const leaseS = cfg.leaseSeconds > 0 ? cfg.leaseSeconds : this.leaseSecondsOf(cfg.queue);
      c.leaseUntil = leaseS ? Date.now() + leaseS * 1000 : null;
      c.delivered += msgs.length;
      totals.delivered += msgs.length;
      const offsets = msgs.map((m) => m.offset);
      const attempt = Math.max(...msgs.map((m) => m.deliveryAttempt || 1));
      this.set(c, 'handling', `${msgs.length} message${msgs.length === 1 ? '' : 's'} (offsets ${offsets[0]}–${offsets[offsets.length - 1]}` +
        `${attempt > 1 ? `, attempt ${attempt}` : ''}${msgs[0].retryCount ? `, ${msgs[0].retryCount} retries used` : ''})`);
      await sleep(cfg.handlingMs, signal);
      if (signal.aborted) break;
      const fails = msgs.map(() => Math.random() < cfg.failureRate);
      if (cfg.failMode === 'crash' && fails.some(Boolean)) {
        c.crashed += 1;
        totals.crashed += 1;
        leaseHolders.set(leaseId, `simulated consumer ${c.id} (crashed)`);
        this.note(`Consumer ${c.id} crashed holding offsets ${offsets.join(', ')}: no ack, the lease will expire.`);
        this.set(c, 'crashed', 'restarting; its lease runs out on its own');
        c.leaseId = null;
        c.leaseUntil = null;
        await sleep(500, signal);
        continue;
      }
      await this.trace(conn, c, msgs, fails, cfg.group);
      const acknowledgments = msgs.map((m, i) => ({
        transactionId: m.transactionId,
        partitionId: m.partitionId,
        leaseId: m.leaseId || leaseId,
        status: fails[i] ? 'failed' : 'completed',
        error: fails[i] ? `Simulated failure in consumer ${c.id}` : null,
      }));
      this.set(c, 'acking');
      try {
        const body = { acknowledgments };
        if (cfg.group) body.consumerGroup = cfg.group;
        const { body: results } = await conn.request('POST', '/api/v1/ack/batch', body);
        this.tally(c, msgs, fails, Array.isArray(results) ? results : [], totals);
      } catch (e) {
        this.set(c, 'error', e.message);
        this.note(`Consumer ${c.id}: ack failed: ${e.message}`);
        await sleep(1000, signal);
      }
      c.leaseId = null;
      c.leaseUntil = null;
    }
    if (c.state !== 'stopped') this.set(c, 'stopped');
  }

  /**
   * Records what the consumer did with each message as a trace event (POST /api/v1/traces, what
   * `msg.trace(...)` sends), named `simulator`; the message browser shows them. As in Queen's clients, a
   * failed trace is ignored (an older broker has no trace route).
   */
  async trace(conn, c, msgs, fails, group) {
    await Promise.all(msgs.map((m, i) => conn.request('POST', '/api/v1/traces', {
      transactionId: m.transactionId,
      partitionId: m.partitionId,
      consumerGroup: group || '__QUEUE_MODE__',
      traceNames: ['simulator'],
      eventType: fails[i] ? 'error' : 'info',
      data: { consumer: c.id, attempt: m.deliveryAttempt || 1, outcome: fails[i] ? 'failed' : 'completed' },
    }).catch(() => {})));
  }

  tally(c, msgs, fails, results, totals) {
    msgs.forEach((m, i) => {
      const r = results[i] || {};
      if (r.success === false) {
        totals.refused += 1;
        this.note(`Consumer ${c.id}: ack of offset ${m.offset} refused: ${r.error || 'no reason given'}.`);
        return;
      }
      if (r.dlq) {
        c.deadLettered += 1;
        totals.deadLettered += 1;
        this.note(`Offset ${m.offset} was dead-lettered after ${m.retryCount ?? '?'} ${m.retryCount === 1 ? 'retry' : 'retries'}.`);
      }
      if (fails[i]) {
        c.failed += 1;
        totals.failed += 1;
      } else {
        c.completed += 1;
        totals.completed += 1;
      }
    });
    const failedAt = msgs.findIndex((_, i) => fails[i]);
    if (failedAt >= 0 && !results[failedAt]?.dlq) {
      this.note(`Consumer ${c.id}: offset ${msgs[failedAt].offset} failed; it and the rest of the batch come back after the retry delay.`);
    }
  }
}

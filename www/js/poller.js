// Polls on a timer with a visible refresh state. One job: call `load()` every `intervalMs`, never two at
// once, back off after failures, and report the phase (live, refreshing, paused, failing).

export class Poller {
  /**
   * @param {() => Promise<void>} load  fetches and publishes fresh data; throws on failure
   * @param {(s: {phase: string, error?: Error, at?: Date, retryMs?: number}) => void} report
   */
  constructor(load, report, intervalMs = 1000) {
    this.load = load;
    this.report = report;
    this.intervalMs = intervalMs;
    this.timer = null;
    this.running = false;
    this.paused = false;
    this.busy = null;
    this.failures = 0;
    this.again = false;
  }

  start() {
    this.running = true;
    this.failures = 0;
    this.kick();
  }

  stop() {
    this.running = false;
    clearTimeout(this.timer);
    this.report({ phase: 'stopped' });
  }

  setPaused(paused) {
    this.paused = paused;
    if (paused) {
      clearTimeout(this.timer);
      this.report({ phase: 'paused' });
    } else {
      this.kick();
    }
  }

  setInterval(ms) {
    this.intervalMs = ms;
    if (this.running && !this.paused && !this.busy) this.schedule(ms);
  }

  /** Refreshes now (after the one in flight, if any). Resolves when the data is on screen. */
  async kick() {
    if (!this.running) return;
    if (this.busy) {
      this.again = true;
      return this.busy;
    }
    clearTimeout(this.timer);
    this.report({ phase: 'refreshing' });
    this.busy = (async () => {
      try {
        await this.load();
        this.failures = 0;
        this.report({ phase: this.paused ? 'paused' : 'live', at: new Date() });
      } catch (error) {
        this.failures += 1;
        this.report({ phase: 'failing', error, retryMs: this.delay() });
      } finally {
        this.busy = null;
      }
    })();
    await this.busy;
    if (this.again) {
      this.again = false;
      return this.kick();
    }
    if (this.running && !this.paused) this.schedule(this.delay());
  }

  delay() {
    return this.failures === 0 ? this.intervalMs : Math.min(10_000, this.intervalMs * 2 ** Math.min(this.failures, 4));
  }

  schedule(ms) {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.kick(), ms);
  }
}

// The device event stream (`GET /v1/envelopes/events`): server-sent events read with fetch,
// because an EventSource cannot send the bearer header. Reconnects after 1 s, doubling to
// 30 s, reset by a `ready`; 45 s without a byte (heartbeats come every 15 s) counts as dead.

import { RELAY_BASE, PhoneError, removed } from './phone.js';

const SILENCE_MS = 45000;
const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 30000;

/**
 * Keeps a stream open for `device` and calls `on.event(name, data)` for each event,
 * `on.up()` when connected, `on.down(error, retryInMs)` when it broke (`error.code` is
 * `broken` for a stream that ended after connecting, which the next try usually mends;
 * anything else means the Relay could not be reached or refused), `on.gone(error)` when the
 * device was removed (then it stops). Returns `{stop(), retryNow()}`.
 */
export function connect(device, on) {
  let stopped = false;
  let retry = RETRY_MIN_MS;
  let controller = null;
  let wake = null;

  const sleep = (ms) =>
    new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        wake = null;
        resolve();
      }
      wake = done;
    });

  async function once() {
    controller = new AbortController();
    let watchdog = 0;
    const feed = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => controller.abort(), SILENCE_MS);
    };
    feed();
    try {
      let res;
      try {
        res = await fetch(new URL('v1/envelopes/events', RELAY_BASE), {
          headers: { Authorization: `Bearer ${device.device_token}`, Accept: 'text/event-stream' },
          cache: 'no-store',
          credentials: 'omit',
          signal: controller.signal,
        });
      } catch (_) {
        throw new PhoneError('unreachable', 'The Relay is unreachable. Check this phone’s connection; the app keeps trying.');
      }
      if (res.status === 401) throw removed();
      if (!res.ok || !res.body) {
        throw new PhoneError(res.status === 429 ? 'rate_limited' : 'relay_error', `The Relay answered HTTP ${res.status}.`);
      }
      on.up();
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      let name = 'message';
      let data = [];
      for (;;) {
        let chunk;
        try {
          chunk = await reader.read();
        } catch (_) {
          break;
        }
        if (chunk.done) break;
        feed();
        buf += chunk.value;
        let nl;
        while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
          if (line === '') {
            if (data.length) dispatch(name, data.join('\n'));
            name = 'message';
            data = [];
          } else if (line.startsWith(':')) {
            /* comment */
          } else {
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'event') name = value;
            else if (field === 'data') data.push(value);
          }
        }
      }
      throw new PhoneError('broken', 'The connection to the Relay broke; reconnecting.');
    } finally {
      clearTimeout(watchdog);
    }
  }

  function dispatch(name, raw) {
    let data;
    try {
      data = JSON.parse(raw);
    } catch (_) {
      return;
    }
    if (name === 'ready') retry = RETRY_MIN_MS;
    if (name === 'revoked') {
      stopped = true;
      controller.abort();
      on.gone(removed());
      return;
    }
    on.event(name, data);
  }

  (async () => {
    while (!stopped) {
      try {
        await once();
      } catch (e) {
        if (stopped) return;
        if (e && e.code === 'device_removed') {
          stopped = true;
          on.gone(e);
          return;
        }
        on.down(e, retry);
        await sleep(retry);
        retry = Math.min(retry * 2, RETRY_MAX_MS);
      }
    }
  })();

  return {
    stop() {
      stopped = true;
      if (controller) controller.abort();
      if (wake) wake();
    },
    retryNow() {
      retry = RETRY_MIN_MS;
      if (wake) wake();
    },
  };
}

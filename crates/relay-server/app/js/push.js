// What the service worker does with a Web Push doorbell and with a tap on its notification,
// written as functions of the registration and the window clients: the worker (sw.js) wires
// them to its events, and the tests run the same code in a page of the app (a tap on a
// notification action cannot be simulated from outside the browser).
//
// A doorbell carries only {type, event_id}. The question is fetched from the Relay and opened
// here, so the push service never sees a prompt, a choice or a nonce.

import * as phone from './phone.js';
import * as store from './store.js';
import { renderVisible } from './render.js';

const ALLOW_IDS = ['allow-once', 'allow', 'yes', 'approve'];
const DENY_IDS = ['deny', 'no', 'reject'];
const VERDICT_WAIT_MS = 25000;

const oneLine = (s, n) => {
  const t = renderVisible(String(s || '').replace(/\s+/g, ' ').trim());
  return t.length > n ? t.slice(0, n - 1) + '…' : t;
};

async function tellPages(clients, message) {
  for (const c of await clients.matchAll({ type: 'window', includeUncontrolled: true })) c.postMessage(message);
}

/** The question behind `eventId`, fetched and checked; null when it is no longer there. */
async function question(device, eventId) {
  const e = (await phone.envelopes(device)).find((x) => x.event_id === eventId);
  return e ? phone.openEnvelope(device, e) : null;
}

/** The notification for a question: tag = event id, Allow/Deny for a permission. */
function notification(q) {
  const options = {
    body: oneLine(q.body ? `${q.prompt} — ${q.body}` : q.prompt, 180),
    tag: q.event_id,
    renotify: true,
    requireInteraction: true,
    icon: 'icon-192.png',
    badge: 'icon-192.png',
    timestamp: Date.parse(q.created_at) || Date.now(),
    data: { event_id: q.event_id, digest: q.request_digest },
  };
  if (q.kind === 'permission') {
    const allow = (q.choices || []).find((c) => ALLOW_IDS.includes(c.id));
    const deny = (q.choices || []).find((c) => DENY_IDS.includes(c.id));
    if (allow && deny) {
      options.actions = [
        { action: 'allow', title: oneLine(allow.label, 30) },
        { action: 'deny', title: oneLine(deny.label, 30) },
      ];
      options.data.allow = allow.id;
      options.data.deny = deny.id;
    }
  }
  const title = `${oneLine(q.agent, 30)}${q.project ? ` · ${oneLine(q.project, 40)}` : ''}`;
  return [title, options];
}

/**
 * Handles one doorbell (the push payload, parsed). Tells open pages afterwards
 * (`{type: 'doorbell', bell, event_id, shown}`), so a page whose stream is down reconnects.
 */
export async function onPush(reg, clients, bell) {
  if (!bell || typeof bell.event_id !== 'string') return;
  let shown = false;
  if (bell.type === 'withdrawn') {
    for (const n of await reg.getNotifications({ tag: bell.event_id })) n.close();
  } else if (bell.type === 'question') {
    const device = await store.loadDevice();
    if (device) {
      try {
        const q = await question(device, bell.event_id);
        if (q) {
          await reg.showNotification(...notification(q));
          shown = true;
        }
      } catch (e) {
        if (e.code === phone.NOT_FROM_YOUR_COMPUTER) {
          await reg.showNotification('Not from your computer', {
            body: 'A question that your computer did not send was refused.',
            tag: bell.event_id,
            icon: 'icon-192.png',
          });
          shown = true;
        }
      }
    }
  } else {
    return;
  }
  await tellPages(clients, { type: 'doorbell', bell: bell.type, event_id: bell.event_id, shown });
}

/**
 * A tap on a notification: an Allow/Deny action answers the question it showed (sealed,
 * exactly that question: same event, same digest) and reports the verdict in a notification
 * of its own; any other tap opens the app.
 */
export async function onNotificationClick(reg, clients, n, action) {
  const data = n.data || {};
  n.close();
  if ((action !== 'allow' && action !== 'deny') || !data.event_id) return openApp(reg, clients);
  const report = (title, body) => reg.showNotification(title, { body, tag: `verdict:${data.event_id}`, icon: 'icon-192.png' });
  const device = await store.loadDevice();
  if (!device) return openApp(reg, clients);
  let q;
  try {
    q = await question(device, data.event_id);
  } catch (e) {
    return report('Not answered', e.message);
  }
  if (!q || q.request_digest !== data.digest) {
    return report('Not answered', 'This question is no longer waiting, or it changed. Open the app to see it.');
  }
  const choice = (q.choices || []).find((c) => c.id === data[action]);
  if (!choice) return report('Not answered', 'That answer is not offered any more. Open the app to see the question.');
  const what = `“${oneLine(choice.label, 40)}”`;
  const entry = { id: q.id, agent: q.agent, project: q.project || null, kind: q.kind, prompt: q.prompt, answer: what };
  let sent;
  try {
    sent = await phone.sendAnswer(device, q, { choice_id: choice.id }, phone.newResponseId());
  } catch (e) {
    return report('Not answered', e.message);
  }
  await store.remember({ ...entry, status: 'sent' });
  await tellPages(clients, { type: 'answered', event_id: data.event_id, sent, what });
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), VERDICT_WAIT_MS);
  let v = null;
  try {
    v = await phone.waitVerdict(device, sent, stop.signal);
  } catch (_) {
    v = null;
  } finally {
    clearTimeout(timer);
  }
  if (!v) return report(`Sent ${what}`, 'No verdict from your computer yet; open the app to see it.');
  if (!(await phone.verdictIsGenuine(device, sent, v))) {
    await store.remember({ ...entry, status: 'unknown', reason: 'verdict not from your computer' });
    return report('Not from your computer', 'A verdict arrived that your computer did not sign; check on your computer.');
  }
  await tellPages(clients, { type: 'answered', event_id: data.event_id, sent, what, verdict: v });
  if (v.status === 'accepted') {
    await store.remember({ ...entry, status: 'accepted' });
    return report(`Accepted ${what}`, oneLine(q.prompt, 120));
  }
  const why = phone.refusalText(v.code, v.message);
  await store.remember({ ...entry, status: 'refused', reason: why });
  return report('Refused', why);
}

async function openApp(reg, clients) {
  const all = await clients.matchAll({ type: 'window', includeUncontrolled: true });
  const scope = new URL(reg.scope).pathname;
  const page = all.find((c) => new URL(c.url).pathname.startsWith(scope));
  if (page) return page.focus();
  return clients.openWindow(reg.scope);
}

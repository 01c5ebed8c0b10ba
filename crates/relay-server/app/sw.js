// The phone app's service worker: Web Push doorbells (SPEC §12.3) and an offline copy of
// the app's own files. A doorbell carries only {type, event_id}; the question itself is
// fetched from the Relay and opened here, so the push service never sees a prompt, a choice
// or a nonce. On Chromium a permission question gets Allow/Deny actions that answer it
// sealed without opening the app; elsewhere a tap opens the app.

import * as phone from './js/phone.js';
import * as store from './js/store.js';
import { renderVisible } from './js/render.js';

const CACHE = 'agentnotify-app-v1';
const ALLOW_IDS = ['allow-once', 'allow', 'yes', 'approve'];
const DENY_IDS = ['deny', 'no', 'reject'];
const VERDICT_WAIT_MS = 25000;

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (e) => e.waitUntil(self.clients.claim()));

// The app's files: from the network when it answers (so an update shows at once), else the
// last copy, so the app opens offline and says the Relay is unreachable. The API is never cached.
self.addEventListener('fetch', (e) => {
  const url = new URL(e.request.url);
  const scope = new URL(self.registration.scope);
  if (e.request.method !== 'GET' || url.origin !== scope.origin || !url.pathname.startsWith(scope.pathname)) return;
  e.respondWith(
    (async () => {
      const cache = await caches.open(CACHE);
      try {
        const res = await fetch(e.request);
        if (res.ok) await cache.put(e.request, res.clone());
        return res;
      } catch (err) {
        const hit = await cache.match(e.request, { ignoreSearch: true });
        if (hit) return hit;
        throw err;
      }
    })(),
  );
});

const oneLine = (s, n) => {
  const t = renderVisible(String(s || '').replace(/\s+/g, ' ').trim());
  return t.length > n ? t.slice(0, n - 1) + '…' : t;
};

async function closeTagged(tag) {
  for (const n of await self.registration.getNotifications({ tag })) n.close();
}

async function tellPages(message) {
  for (const c of await self.clients.matchAll({ type: 'window', includeUncontrolled: true })) c.postMessage(message);
}

/** The question behind `eventId`, fetched and checked; null when it is no longer there. */
async function question(device, eventId) {
  const e = (await phone.envelopes(device)).find((x) => x.event_id === eventId);
  return e ? phone.openEnvelope(device, e) : null;
}

async function onPush(event) {
  let bell = null;
  try {
    bell = event.data ? event.data.json() : null;
  } catch (_) {
    bell = null;
  }
  if (!bell || typeof bell.event_id !== 'string') return;
  if (bell.type === 'withdrawn') {
    await closeTagged(bell.event_id);
    await tellPages({ type: 'withdrawn', event_id: bell.event_id });
    return;
  }
  if (bell.type !== 'question') return;
  const device = await store.loadDevice();
  if (!device) return;
  let q;
  try {
    q = await question(device, bell.event_id);
  } catch (e) {
    if (e.code === phone.NOT_FROM_YOUR_COMPUTER) {
      await self.registration.showNotification('Not from your computer', {
        body: 'A question that your computer did not send was refused.',
        tag: bell.event_id,
        icon: 'icon-192.png',
      });
    }
    return;
  }
  if (!q) return;
  const options = {
    body: oneLine(q.body ? `${q.prompt} — ${q.body}` : q.prompt, 180),
    tag: bell.event_id,
    renotify: true,
    requireInteraction: true,
    icon: 'icon-192.png',
    badge: 'icon-192.png',
    timestamp: Date.parse(q.created_at) || Date.now(),
    data: { event_id: bell.event_id, digest: q.request_digest },
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
  await self.registration.showNotification(title, options);
}

self.addEventListener('push', (e) => e.waitUntil(onPush(e)));

async function answerFromNotification(data, action) {
  const report = (title, body) =>
    self.registration.showNotification(title, { body, tag: `verdict:${data.event_id}`, icon: 'icon-192.png' });
  const device = await store.loadDevice();
  if (!device) return;
  let q;
  try {
    q = await question(device, data.event_id);
  } catch (e) {
    return report('Not answered', e.message);
  }
  // Answer only exactly the question the notification showed.
  if (!q || q.request_digest !== data.digest) {
    return report('Not answered', 'This question is no longer waiting, or it changed. Open the app to see it.');
  }
  const choice = (q.choices || []).find((c) => c.id === data[action]);
  if (!choice) return report('Not answered', 'That answer is not offered any more. Open the app to see the question.');
  const what = `“${oneLine(choice.label, 40)}”`;
  let sent;
  try {
    sent = await phone.sendAnswer(device, q, { choice_id: choice.id }, phone.newResponseId());
  } catch (e) {
    return report('Not answered', e.message);
  }
  await store.remember({ id: q.id, agent: q.agent, project: q.project || null, kind: q.kind, prompt: q.prompt, answer: what, status: 'sent' });
  await tellPages({ type: 'answered', event_id: data.event_id, sent, what });
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
  const entry = { id: q.id, agent: q.agent, project: q.project || null, kind: q.kind, prompt: q.prompt, answer: what };
  if (!(await phone.verdictIsGenuine(device, sent, v))) {
    await store.remember({ ...entry, status: 'unknown', reason: 'verdict not from your computer' });
    return report('Not from your computer', 'A verdict arrived that your computer did not sign; check on your computer.');
  }
  await tellPages({ type: 'answered', event_id: data.event_id, sent, what, verdict: v });
  if (v.status === 'accepted') {
    await store.remember({ ...entry, status: 'accepted' });
    return report(`Accepted ${what}`, oneLine(q.prompt, 120));
  }
  const why = phone.refusalText(v.code, v.message);
  await store.remember({ ...entry, status: 'refused', reason: why });
  return report('Refused', why);
}

async function openApp() {
  const all = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  const page = all.find((c) => new URL(c.url).pathname.startsWith(new URL(self.registration.scope).pathname));
  if (page) return page.focus();
  return self.clients.openWindow(self.registration.scope);
}

self.addEventListener('notificationclick', (e) => {
  e.notification.close();
  const data = e.notification.data || {};
  if ((e.action === 'allow' || e.action === 'deny') && data.event_id) {
    e.waitUntil(answerFromNotification(data, e.action));
  } else {
    e.waitUntil(openApp());
  }
});

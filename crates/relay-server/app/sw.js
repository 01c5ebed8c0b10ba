// The phone app's service worker: Web Push doorbells and taps on their notifications (SPEC
// §12.3, the work is in js/push.js), and an offline copy of the app's own files.

import { onPush, onNotificationClick } from './js/push.js';

const CACHE = 'agentnotify-app-v1';
// Everything the page loads, kept at install so the app opens with the Relay out of reach
// (a test checks this list against the folder).
const SHELL = [
  './',
  'index.html',
  'base.css',
  'app.css',
  'manifest.webmanifest',
  'icon.svg',
  'icon-192.png',
  'js/main.js',
  'js/card.js',
  'js/dom.js',
  'js/offers.js',
  'js/phone.js',
  'js/crypto.js',
  'js/render.js',
  'js/store.js',
  'js/stream.js',
  'js/push.js',
  'vendor/noble-ciphers/chacha.js',
  'vendor/noble-ciphers/_arx.js',
  'vendor/noble-ciphers/_poly1305.js',
  'vendor/noble-ciphers/utils.js',
];

self.addEventListener('install', (e) => {
  self.skipWaiting();
  e.waitUntil(caches.open(CACHE).then((c) => c.addAll(SHELL)));
});
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

self.addEventListener('push', (e) => {
  let bell = null;
  try {
    bell = e.data ? e.data.json() : null;
  } catch (_) {
    bell = null;
  }
  e.waitUntil(onPush(self.registration, self.clients, bell));
});

self.addEventListener('notificationclick', (e) => {
  e.waitUntil(onNotificationClick(self.registration, self.clients, e.notification, e.action));
});

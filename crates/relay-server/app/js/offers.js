// The two offers after pairing: "Add to home screen" (the browser's install prompt, or how
// to do it on iOS) and "Allow notifications" (the Relay's VAPID key to the browser's push
// service, the subscription to the Relay). Each has "Not now", remembered on this phone.

import { $ } from './dom.js';
import * as phone from './phone.js';

const SUBSCRIBE_MS = 10000;

const standalone = () => matchMedia('(display-mode: standalone)').matches || navigator.standalone === true;
const isIOS = () => /iPhone|iPad|iPod/.test(navigator.userAgent);
const later = (what) => localStorage.getItem(`later:${what}`) === '1';

/**
 * Wires the offers' buttons. `device()` is the paired device (or null), `notice(text)` tells
 * the person, `moved()` re-arms the click guard (an offer coming or going moves the cards).
 * Returns `{show()}`, which shows whichever offers still apply.
 */
export function initOffers({ device, notice, moved }) {
  let installPrompt = null;

  function offerInstall() {
    const can = !standalone() && !later('install') && (installPrompt || isIOS());
    $('offer-install').hidden = !can;
    $('install-how').hidden = !isIOS();
    $('install-go').hidden = !installPrompt;
    moved();
  }

  async function offerNotifications() {
    let show = 'Notification' in window && 'PushManager' in window && !later('notify');
    if (show && Notification.permission === 'granted') {
      const reg = await navigator.serviceWorker?.getRegistration();
      show = !(await reg?.pushManager.getSubscription());
    }
    if (show && Notification.permission === 'denied') {
      $('notify-msg').textContent = 'Notifications are blocked for this site; allow them in the browser’s site settings.';
    }
    $('offer-notify').hidden = !show;
    moved();
  }

  async function allowNotifications() {
    const msg = $('notify-msg');
    if (isIOS() && !standalone()) {
      msg.textContent = 'On iPhone and iPad, add agentnotify to your home screen first, then allow notifications from there.';
      return;
    }
    msg.textContent = '';
    const permission = await Notification.requestPermission();
    if (permission !== 'granted') {
      msg.textContent = 'Notifications were not allowed. The app still shows questions while it is open.';
      return;
    }
    try {
      const r = await phone.api(null, 'GET', 'v1/push/vapid-public-key');
      if (!r.ok || !r.data.public_key) throw new Error('this Relay offers no Web Push');
      const reg = await navigator.serviceWorker.ready;
      msg.textContent = 'Asking this browser’s push service…';
      // A browser that cannot reach its push service may never answer: give up after a while.
      const sub = await Promise.race([
        reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: r.data.public_key }),
        new Promise((_, reject) => setTimeout(() => reject(new Error('it did not answer in 10 s')), SUBSCRIBE_MS)),
      ]);
      const s = await phone.api(device(), 'POST', 'v1/devices/push-subscription', sub.toJSON());
      if (!s.ok) throw new Error(s.data.error || `the Relay answered HTTP ${s.status}`);
      $('offer-notify').hidden = true;
      moved();
      notice('Notifications are on: a question reaches this phone even when the app is closed.');
    } catch (e) {
      msg.textContent = `Notifications are allowed, but this browser could not subscribe to its push service (${e.message}). The app still shows questions while it is open.`;
    }
  }

  $('install-later').addEventListener('click', () => {
    localStorage.setItem('later:install', '1');
    offerInstall();
  });
  $('notify-later').addEventListener('click', () => {
    localStorage.setItem('later:notify', '1');
    offerNotifications();
  });
  $('install-go').addEventListener('click', async () => {
    const p = installPrompt;
    installPrompt = null;
    if (p) await p.prompt();
    offerInstall();
  });
  $('notify-go').addEventListener('click', allowNotifications);
  window.addEventListener('beforeinstallprompt', (e) => {
    e.preventDefault();
    installPrompt = e;
    if (device()) offerInstall();
  });

  return {
    show() {
      offerInstall();
      offerNotifications();
    },
  };
}

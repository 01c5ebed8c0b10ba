// The phone app's page: pair from the link, keep the event stream open, show each question
// whole and exact (SPEC §13.2), answer it sealed, show the verdict. Plain DOM, no framework;
// everything from a question is put on the page as text, never parsed as HTML.

import * as store from './store.js';
import * as phone from './phone.js';
import { connect } from './stream.js';
import { $, el, shown, short } from './dom.js';
import { buildCard, setBusy, guardMoved as guardCards } from './card.js';
import { initOffers } from './offers.js';

const DONE_LINGER_MS = 15000;

const state = {
  device: null,
  stream: null,
  cards: new Map(), // event_id -> card record {q, li, msg, responseId, sent, verdict, done}
  forged: new Map(), // event_id -> <li> of an envelope that failed its checks
  snapshot: null, // event ids seen since the last connect, until its `ready`
  pendingCode: null, // a pairing code read from the link, in memory only
  chain: Promise.resolve(),
};

let offers = null;

/** Re-arms the click guard of every card that appeared or moved. */
const guardMoved = () => guardCards(state.cards.values());

// ---- banner, live pill, notices -------------------------------------------------------------

function setLive(mode, text) {
  $('live').dataset.live = mode;
  $('live').textContent = text || { on: 'Live', connecting: 'Connecting…', off: 'Offline' }[mode];
}

function banner(code, text, action) {
  const b = $('banner');
  if (!code) {
    if (!b.hidden) {
      b.hidden = true;
      guardMoved();
    }
    return;
  }
  b.dataset.code = code;
  $('banner-text').textContent = text;
  const btn = $('banner-action');
  btn.hidden = !action;
  if (action) {
    btn.textContent = action.label;
    btn.onclick = action.run;
  }
  if (b.hidden) {
    b.hidden = false;
    guardMoved();
  }
}

let noticeTimer = 0;
function notice(text) {
  clearTimeout(noticeTimer);
  banner('notice', text, { label: 'OK', run: () => banner(null) });
  noticeTimer = setTimeout(() => {
    if ($('banner').dataset.code === 'notice') banner(null);
  }, 6000);
}

// ---- time -----------------------------------------------------------------------------------

function fmtLeft(ms) {
  const s = Math.ceil(ms / 1000);
  if (s >= 3600) return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min left`;
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')} left`;
}

function tick() {
  const now = Date.now();
  for (const rec of state.cards.values()) {
    const left = Date.parse(rec.q.expires_at) - now;
    const e = rec.left;
    if (left > 0) {
      e.textContent = fmtLeft(left);
      e.toggleAttribute('data-urgent', left < 60000);
    } else if (!rec.expired) {
      rec.expired = true;
      e.textContent = 'expired';
      e.setAttribute('data-urgent', '');
      if (!rec.mine) {
        setBusy(rec, true);
        rec.li.dataset.state = 'expired';
        rec.msg.textContent = 'This question expired. Your agent asks at its own terminal instead.';
        store.remember(historyEntry(rec, { status: 'expired' }));
        finishLater(rec);
      }
    }
  }
}

// ---- answering --------------------------------------------------------------------------------

async function send(rec, answer, what) {
  if (rec.li.getAttribute('aria-busy') === 'true' || rec.sent) return;
  setBusy(rec, true);
  // From here the card is this phone's answer: a `withdrawn` that beats the Relay's reply
  // (the answer was accepted that fast) must not take it away.
  rec.mine = true;
  rec.msg.textContent = 'Sealing and sending…';
  rec.what = typeof what === 'string' ? short(what, 60) : what;
  let sent;
  try {
    sent = await phone.sendAnswer(state.device, rec.q, answer, rec.responseId);
  } catch (e) {
    if (e.code === 'device_removed') return deviceGone(e);
    const final = e.relay && e.code !== 'rate_limited';
    rec.msg.textContent = e.code === 'unreachable' ? 'Could not reach the Relay; your answer was not sent. Tap again to retry.' : e.message;
    if (final) {
      rec.li.dataset.state = 'done';
      rec.li.dataset.verdict = 'refused';
      rec.sent = { response_id: rec.responseId, interaction_id: rec.q.id };
      store.remember(historyEntry(rec, { status: 'refused', reason: e.message }));
      finishLater(rec);
    } else {
      rec.mine = false;
      setBusy(rec, false);
    }
    return;
  }
  rec.sent = sent;
  rec.li.dataset.state = 'sent';
  afterListChange();
  rec.msg.textContent = `Sent ${rec.what}. Waiting for your computer…`;
  store.remember(historyEntry(rec, { status: 'sent' }));
  const abort = new AbortController();
  rec.abortWait = abort;
  phone
    .waitVerdict(state.device, sent, abort.signal)
    .then((v) => verdict(rec, v))
    .catch(() => {
      /* the stream's verdict event (or a reload) tells instead */
    });
}

async function verdict(rec, v) {
  if (!rec.sent || rec.verdict) return;
  const genuine = await phone.verdictIsGenuine(state.device, rec.sent, v);
  if (rec.verdict) return;
  if (rec.abortWait) rec.abortWait.abort();
  if (!genuine) {
    // Shown, but not final: the genuine verdict may still come on the stream.
    rec.li.dataset.verdict = 'forged';
    rec.msg.textContent =
      'A verdict arrived that is not from your computer (its signature does not check); it was ignored. Check on your computer whether the answer was applied.';
    store.remember(historyEntry(rec, { status: 'unknown', reason: 'verdict not from your computer' }));
    return;
  }
  rec.verdict = v.status;
  rec.li.dataset.verdict = v.status;
  rec.li.dataset.state = 'done';
  if (v.status === 'accepted') {
    rec.msg.textContent = `Accepted: your computer applied ${rec.what}.`;
    store.remember(historyEntry(rec, { status: 'accepted' }));
  } else {
    const why = phone.refusalText(v.code, v.message);
    rec.msg.textContent = `Refused: ${why}`;
    store.remember(historyEntry(rec, { status: 'refused', reason: why }));
  }
  finishLater(rec);
}

// A settled card stays a while with its outcome, then leaves for the history.
function finishLater(rec) {
  if (rec.done) return;
  rec.done = true;
  afterListChange();
  const dismiss = el('button', { type: 'button', class: 'btn ghost small', 'data-action': 'dismiss', text: 'Dismiss' });
  dismiss.addEventListener('click', () => dropCard(rec.q.event_id));
  rec.msg.after(dismiss);
  setTimeout(() => dropCard(rec.q.event_id), DONE_LINGER_MS);
}

function historyEntry(rec, extra) {
  const q = rec.q;
  return {
    id: q.id,
    agent: q.agent,
    project: q.project || null,
    kind: q.kind,
    prompt: q.prompt,
    answer: rec.what || null,
    ...extra,
    at: new Date().toISOString(),
  };
}

function dropCard(eventId) {
  const rec = state.cards.get(eventId);
  if (!rec) return;
  if (rec.abortWait) rec.abortWait.abort();
  rec.li.remove();
  state.cards.delete(eventId);
  afterListChange();
}

// ---- envelopes and stream events ----------------------------------------------------------------

async function onEnvelope(e) {
  const id = e && e.event_id;
  if (state.snapshot && id) state.snapshot.add(id);
  let q;
  try {
    q = await phone.openEnvelope(state.device, e);
  } catch (err) {
    if (err.code === phone.NOT_FROM_YOUR_COMPUTER) return showForged(id || 'unknown', err);
    throw err;
  }
  const old = state.cards.get(q.event_id);
  if (old) {
    if (old.mine || old.q.request_digest === q.request_digest) return;
    dropCard(q.event_id);
  }
  const rec = buildCard(q, send);
  state.cards.set(q.event_id, rec);
  $('cards').append(rec.li);
  afterListChange();
}

function showForged(eventId, err) {
  if (state.forged.has(eventId)) return;
  const dismiss = el('button', { type: 'button', class: 'btn ghost small', 'data-action': 'dismiss', text: 'Dismiss' });
  const li = el(
    'li',
    { class: 'card forged', 'data-forged': eventId, role: 'alert' },
    el('p', { class: 'forged-title', text: 'Not from your computer' }),
    el('p', { text: err.message }),
    dismiss,
  );
  dismiss.addEventListener('click', () => {
    li.remove();
    state.forged.delete(eventId);
    afterListChange();
  });
  state.forged.set(eventId, li);
  $('cards').prepend(li);
  afterListChange();
}

function onWithdrawn(eventId) {
  closeNotification(eventId);
  const rec = state.cards.get(eventId);
  if (!rec) return;
  if (rec.mine || rec.done) return; // this phone's own answer: its outcome stays shown
  dropCard(eventId);
  store.remember(historyEntry(rec, { status: 'elsewhere' }));
  notice(`“${short(rec.q.prompt, 60)}” was answered or withdrawn elsewhere.`);
}

function onReady() {
  const seen = state.snapshot || new Set();
  state.snapshot = null;
  for (const [eventId, rec] of [...state.cards]) {
    if (!seen.has(eventId) && !rec.mine && !rec.done) onWithdrawn(eventId);
  }
  setLive('on');
  if (['unreachable', 'relay_error', 'rate_limited'].includes($('banner').dataset.code)) banner(null);
}

function onStreamEvent(name, data) {
  // One at a time, in order: a `ready` is handled after the envelopes before it opened.
  state.chain = state.chain
    .then(() => {
      if (name === 'envelope') return onEnvelope(data);
      if (name === 'ready') return onReady();
      if (name === 'withdrawn') return onWithdrawn(data.event_id);
      if (name === 'verdict') {
        for (const rec of state.cards.values()) {
          if (rec.sent && rec.sent.response_id === data.response_id) return verdict(rec, data);
        }
      }
      return undefined;
    })
    .catch(() => {});
}

function startStream() {
  if (state.stream) state.stream.stop();
  setLive('connecting');
  state.stream = connect(state.device, {
    up() {
      state.snapshot = new Set();
    },
    event: onStreamEvent,
    down(err, retryIn) {
      // A stream that broke after it worked is mended by the next try: no alarm yet.
      if (err.code === 'broken') return setLive('connecting', 'Reconnecting…');
      setLive('off');
      const secs = Math.round(retryIn / 1000);
      banner(err.code || 'unreachable', `${err.message} Next try in ${secs} s.`, {
        label: 'Retry now',
        run: () => state.stream && state.stream.retryNow(),
      });
    },
    gone: deviceGone,
  });
}

function deviceGone(err) {
  if (state.stream) state.stream.stop();
  state.stream = null;
  setLive('off', 'Removed');
  banner('device_removed', err.message, { label: 'Pair again', run: unpair });
  for (const rec of state.cards.values()) setBusy(rec, true);
}

async function closeNotification(eventId) {
  try {
    const reg = await navigator.serviceWorker?.getRegistration();
    for (const n of (await reg?.getNotifications({ tag: eventId })) || []) n.close();
  } catch (_) {
    /* no service worker here */
  }
}

function afterListChange() {
  const n = [...state.cards.values()].filter((r) => !r.mine && !r.done).length;
  $('count').textContent = String(n);
  $('count').dataset.n = String(n);
  $('empty').hidden = state.cards.size > 0 || state.forged.size > 0;
  document.title = n > 0 ? `(${n}) agentnotify` : 'agentnotify';
  guardMoved();
  tick();
}

// ---- history ------------------------------------------------------------------------------------

const OUTCOME = {
  accepted: 'Accepted',
  refused: 'Refused',
  sent: 'Sent, no verdict yet',
  elsewhere: 'Answered or withdrawn elsewhere',
  expired: 'Expired',
  unknown: 'Verdict not from your computer',
};

async function renderHistory() {
  const items = await store.loadHistory();
  $('history').replaceChildren(
    ...items.map((h) =>
      el(
        'li',
        { class: 'card', 'data-id': h.id, 'data-status': h.status },
        el('div', { class: 'meta' }, el('span', { class: 'status', 'data-status': h.status, text: OUTCOME[h.status] || h.status }), el('span', { class: 'agent', text: short(h.agent, 40) }), h.project ? el('span', { class: 'project', text: short(h.project, 60) }) : null, el('span', { class: 'left', text: new Date(h.at).toLocaleString([], { dateStyle: 'short', timeStyle: 'short' }) })),
        el('p', { class: 'prompt' }, shown(h.prompt)),
        h.answer ? el('p', { class: 'outcome' }, 'Your answer: ', el('strong', { text: h.answer })) : null,
        h.reason ? el('p', { class: 'outcome', text: h.reason }) : null,
      ),
    ),
  );
  $('history-empty').hidden = items.length > 0;
}

// ---- tabs -------------------------------------------------------------------------------------

function select(tab) {
  for (const t of document.querySelectorAll('[role="tab"]')) {
    const on = t === tab;
    t.setAttribute('aria-selected', on ? 'true' : 'false');
    t.tabIndex = on ? 0 : -1;
    $(t.getAttribute('aria-controls')).hidden = !on;
  }
  if (tab.id === 'tab-history') renderHistory();
  guardMoved();
}

// ---- pairing ------------------------------------------------------------------------------------

function show(section) {
  for (const id of ['welcome', 'pairing', 'panel-questions', 'panel-history']) $(id).hidden = id !== section;
  $('tabs').hidden = section !== 'panel-questions';
  $('foot').hidden = !state.device || section === 'pairing';
}

function defaultName() {
  const ua = navigator.userAgent;
  if (/iPhone/.test(ua)) return 'iPhone';
  if (/iPad/.test(ua)) return 'iPad';
  if (/Android/.test(ua)) return 'Android phone';
  return 'Browser';
}

function askToPair(code) {
  let info;
  try {
    info = phone.decodeCode(code);
  } catch (e) {
    show(state.device ? 'panel-questions' : 'welcome');
    banner(e.code, e.message);
    return;
  }
  state.pendingCode = code;
  const host = info.relay_url ? new URL(info.relay_url, location.href).host : location.host;
  const what = [`Your computer (installation ${info.installation_id.slice(0, 8)}…) will send its questions to this phone through the Relay at ${host}, sealed so the Relay cannot read them.`];
  if (state.device) what.push(`This replaces the pairing “${state.device.name}”.`);
  $('pair-what').textContent = what.join(' ');
  $('device-name').value = state.device ? state.device.name : defaultName();
  $('pair-msg').textContent = '';
  banner(null);
  show('pairing');
  $('pair-go').focus();
}

async function doPair(e) {
  e.preventDefault();
  const name = $('device-name').value.trim();
  if (!name) {
    $('pair-msg').textContent = 'Give this phone a name, so you recognise it on your computer.';
    return;
  }
  $('pair-go').disabled = true;
  $('pair-msg').textContent = 'Pairing…';
  try {
    const device = await phone.pair(state.pendingCode, name);
    if (state.device) await leave();
    await store.saveDevice(device);
    state.pendingCode = null; // the code is spent; it is not kept anywhere
    state.device = device;
    notice(`Paired as “${name}”. Questions from your computer appear here.`);
    enterApp();
  } catch (err) {
    $('pair-msg').textContent = err.message;
  } finally {
    $('pair-go').disabled = false;
  }
}

function cancelPair() {
  state.pendingCode = null;
  if (state.device) enterApp();
  else show('welcome');
}

function pasted(e) {
  e.preventDefault();
  const code = phone.codeFrom($('paste').value);
  $('paste').value = '';
  if (!code) return banner('bad_code', 'That is not a pairing link or code. Copy the whole link that `agentnotify relay pair` prints.');
  askToPair(code);
}

// Ends this pairing on this phone: stream, push subscription, stored device and history.
async function leave() {
  if (state.stream) state.stream.stop();
  state.stream = null;
  const device = state.device;
  try {
    const reg = await navigator.serviceWorker?.getRegistration();
    const sub = await reg?.pushManager?.getSubscription();
    if (sub) await sub.unsubscribe();
    if (device) await phone.api(device, 'DELETE', 'v1/devices/push-subscription').catch(() => {});
  } catch (_) {
    /* nothing to undo */
  }
  for (const id of [...state.cards.keys()]) dropCard(id);
  for (const li of state.forged.values()) li.remove();
  state.forged.clear();
  await store.forgetDevice();
  await store.clearHistory();
  state.device = null;
}

async function unpair() {
  await leave();
  banner(null);
  setLive('off', 'Not paired');
  show('welcome');
}

// ---- start ------------------------------------------------------------------------------------------

function enterApp() {
  show('panel-questions');
  select($('tab-questions'));
  $('paired-as').textContent = `This phone is “${state.device.name}”, paired ${new Date(state.device.paired_at).toLocaleDateString()}.`;
  afterListChange();
  startStream();
  offers.show();
}

/** Reads a pairing code from the link and removes it from the address bar and history at once. */
function takeCodeFromLink() {
  const code = phone.codeFrom(location.hash);
  if (location.hash) history.replaceState(null, '', location.pathname + location.search);
  return code;
}

async function start() {
  const code = takeCodeFromLink();
  if (!window.isSecureContext || !crypto.subtle) {
    show('welcome');
    banner('insecure', 'This page must be opened over HTTPS: the browser offers its cryptography only there.');
    return;
  }
  if ('serviceWorker' in navigator) {
    navigator.serviceWorker.register('sw.js', { type: 'module', scope: './' }).catch(() => {});
    navigator.serviceWorker.addEventListener('message', (e) => {
      const d = e.data || {};
      // A doorbell the worker handled: news even if the stream missed it (down, in backoff).
      if (d.type === 'doorbell' && typeof d.event_id === 'string') {
        if (d.bell === 'withdrawn') onStreamEvent('withdrawn', { event_id: d.event_id });
        else if ($('live').dataset.live !== 'on' && state.stream) state.stream.retryNow();
      }
      if (d.type === 'answered') {
        const rec = state.cards.get(d.event_id);
        if (rec && !rec.sent) {
          rec.mine = true;
          rec.sent = d.sent;
          rec.what = d.what;
          setBusy(rec, true);
          rec.li.dataset.state = 'sent';
          rec.msg.textContent = `Sent ${d.what} from the notification. Waiting for your computer…`;
          if (d.verdict) verdict(rec, d.verdict);
        }
      }
    });
  }
  for (const t of document.querySelectorAll('[role="tab"]')) t.addEventListener('click', () => select(t));
  $('pair-form').addEventListener('submit', doPair);
  $('pair-cancel').addEventListener('click', cancelPair);
  $('paste-form').addEventListener('submit', pasted);
  $('unpair').addEventListener('click', () => {
    if (confirm('Unpair this phone? It stops getting questions until you pair it again.')) unpair();
  });
  offers = initOffers({ device: () => state.device, notice, moved: guardMoved });
  window.addEventListener('online', () => state.stream && state.stream.retryNow());
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && state.stream) state.stream.retryNow();
  });
  window.addEventListener('hashchange', () => {
    const c = takeCodeFromLink();
    if (c) askToPair(c);
  });
  setInterval(tick, 1000);

  try {
    state.device = await store.loadDevice();
  } catch (_) {
    banner('storage', 'This browser will not let the app keep its pairing (private mode?). Open it in a normal tab.');
  }
  if (code) return askToPair(code);
  if (!state.device) {
    setLive('off', 'Not paired');
    return show('welcome');
  }
  enterApp();
}

start();

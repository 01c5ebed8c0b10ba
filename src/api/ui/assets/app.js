// agentnotify web UI. Plain DOM, no framework, no build step. Everything the server sends is
// put on the page as text (never parsed as HTML), so a prompt cannot inject markup.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);

  const KIND_LABEL = { permission: 'Permission', single_choice: 'Choice', text: 'Question' };
  const STATUS_LABEL = {
    answered: 'Answered',
    expired: 'Expired',
    cancelled: 'Withdrawn',
    superseded: 'Replaced',
  };
  const ALLOW_IDS = new Set(['allow', 'allow-once', 'allow-always', 'yes', 'approve']);
  const DENY_IDS = new Set(['deny', 'no', 'reject']);

  const state = {
    cards: new Map(), // id -> <li> of a pending question
    acted: new Set(), // ids this page answered or withdrew (not announced as "closed elsewhere")
    skew: 0, // server clock minus ours, in ms
    loaded: false,
    signedOut: false,
    es: null,
    noticeTimer: 0,
  };

  // Builds an element; strings among the children become text nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k === 'class') e.className = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function newId() {
    if (window.crypto && crypto.randomUUID) return 'web-' + crypto.randomUUID();
    const b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return 'web-' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  }

  async function api(method, path, body) {
    const init = {
      method,
      credentials: 'same-origin',
      cache: 'no-store',
      headers: { Accept: 'application/json' },
    };
    if (method !== 'GET') {
      init.headers['Content-Type'] = 'application/json';
      init.headers['X-Agentnotify-UI'] = '1';
      init.body = JSON.stringify(body || {});
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (_) {
      return {
        ok: false,
        status: 0,
        data: { code: 'network', error: 'Could not reach the broker. Is it still running?' },
      };
    }
    let data = null;
    try {
      data = await res.json();
    } catch (_) {
      data = null;
    }
    if (res.status === 401) signedOut();
    return { ok: res.ok, status: res.status, data: data || {} };
  }

  // ---- time ---------------------------------------------------------------------------------

  const now = () => Date.now() + state.skew;

  function fmtLeft(ms) {
    const s = Math.ceil(ms / 1000);
    if (s >= 3600) {
      const h = Math.floor(s / 3600);
      return `${h} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min left`;
    }
    return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')} left`;
  }

  function fmtAgo(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 10) return 'just now';
    if (s < 60) return `${s} s ago`;
    if (s < 3600) return `${Math.floor(s / 60)} min ago`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
    return `${Math.floor(s / 86400)} d ago`;
  }

  function tick() {
    const t = now();
    for (const e of document.querySelectorAll('[data-expires]')) {
      const left = Date.parse(e.dataset.expires) - t;
      if (left <= 0) {
        e.textContent = 'expired';
        e.setAttribute('data-urgent', '');
        const card = e.closest('.card');
        if (card) for (const b of card.querySelectorAll('button, textarea')) b.disabled = true;
      } else {
        e.textContent = fmtLeft(left);
        e.toggleAttribute('data-urgent', left < 60000);
      }
    }
    for (const e of document.querySelectorAll('[data-ago]')) {
      e.textContent = (e.dataset.prefix || '') + fmtAgo(t - Date.parse(e.dataset.ago));
    }
  }

  // ---- messages -----------------------------------------------------------------------------

  function notify(text, tone) {
    clearTimeout(state.noticeTimer);
    $('notice-text').textContent = text;
    $('notice').dataset.tone = tone || 'warn';
    $('notice').hidden = false;
    if (tone === 'ok') state.noticeTimer = setTimeout(() => ($('notice').hidden = true), 6000);
  }

  function explain(r) {
    const d = r.data || {};
    switch (d.code) {
      case 'already_answered':
        return d.error || 'This question was already answered elsewhere.';
      case 'digest_mismatch':
        return 'This question changed; reload the page and answer again.';
      case 'not_pending':
        return d.error || 'This question is no longer waiting for an answer.';
      case 'no_session':
        return 'Your session ended. Run agentnotify ui in a terminal for a new link.';
      case 'forbidden':
        return 'The broker refused this request (security check). Reload the page.';
      case 'rate_limited':
        return 'Too many requests right now; try again in a moment.';
      default:
        return d.error || `The broker answered HTTP ${r.status}.`;
    }
  }

  function short(text, n) {
    const one = text.replace(/\s+/g, ' ').trim();
    return one.length > n ? one.slice(0, n - 1) + '…' : one;
  }

  function setLive(mode, text) {
    const e = $('live');
    e.dataset.live = mode;
    e.textContent = text || { on: 'Live', connecting: 'Reconnecting…', off: 'Offline' }[mode];
  }

  function signedOut() {
    if (state.signedOut) return;
    state.signedOut = true;
    if (state.es) state.es.close();
    setLive('off', 'Signed out');
    $('signin').hidden = false;
    $('panel-pending').hidden = true;
    $('panel-history').hidden = true;
    document.querySelector('.tabs').hidden = true;
  }

  // ---- pending cards ------------------------------------------------------------------------

  function meta(q, extra) {
    const agent = q.agent + (q.agent_instance ? ` (${q.agent_instance})` : '');
    return el(
      'div',
      { class: 'meta' },
      extra,
      el('span', { class: 'agent', text: agent }),
      q.project ? el('span', { class: 'project', text: q.project }) : null,
    );
  }

  function promptEl(q, id) {
    const tag = q.kind === 'permission' ? 'pre' : 'p';
    return el(tag, { class: 'prompt', id, text: q.prompt });
  }

  function choiceClass(c, q) {
    if (q.kind === 'permission' && ALLOW_IDS.has(c.id)) return 'btn allow';
    if (q.kind === 'permission' && DENY_IDS.has(c.id)) return 'btn deny';
    return 'btn';
  }

  function buildCard(q) {
    const card = el('li', {
      class: 'card' + (state.loaded ? ' fresh' : ''),
      'data-id': q.id,
      'data-kind': q.kind,
      'aria-labelledby': `p-${q.id}`,
    });
    const m = meta(q, el('span', { class: 'kind', text: KIND_LABEL[q.kind] || q.kind }));
    m.append(
      el('span', { class: 'age', 'data-ago': q.created_at, 'data-prefix': 'asked ' }),
      el('span', { class: 'left', 'data-expires': q.expires_at }),
    );
    card.append(m, promptEl(q, `p-${q.id}`));

    const msg = el('p', { class: 'card-msg', role: 'status' });
    // One idempotency key per question: a retry after a lost reply replays, never doubles.
    const responseId = newId();
    const send = (answer, what) => respond(card, q, msg, responseId, answer, what);

    if (q.kind === 'text') {
      const max = q.text_max_length || 500;
      const ta = el('textarea', {
        id: `t-${q.id}`,
        name: 'text',
        rows: 3,
        maxlength: max,
        'aria-describedby': `c-${q.id}`,
      });
      const counter = el('span', { class: 'counter', id: `c-${q.id}`, 'aria-live': 'off' });
      const count = () => {
        const n = Array.from(ta.value).length;
        counter.textContent = `${n} / ${max}`;
        counter.toggleAttribute('data-over', n > max);
      };
      count();
      ta.addEventListener('input', count);
      const form = el(
        'form',
        { class: 'text-answer', novalidate: true },
        el('label', { for: `t-${q.id}`, text: `Your answer (up to ${max} characters)` }),
        ta,
        el(
          'div',
          { class: 'text-row' },
          counter,
          el('button', { type: 'submit', class: 'btn primary', 'data-action': 'send', text: 'Send answer' }),
        ),
      );
      form.addEventListener('submit', (e) => {
        e.preventDefault();
        const text = ta.value;
        const n = Array.from(text).length;
        if (!text.trim()) {
          msg.textContent = 'Type an answer first.';
          ta.focus();
          return;
        }
        if (n > max) {
          msg.textContent = `The answer is ${n} characters; the limit is ${max}.`;
          ta.focus();
          return;
        }
        send({ text }, short(text, 40));
      });
      ta.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
          e.preventDefault();
          form.requestSubmit();
        }
      });
      card.append(form);
    } else {
      const stacked = q.choices.some((c) => c.detail) || q.choices.length > 4;
      const box = el('div', {
        class: 'choices' + (stacked ? ' stacked' : ''),
        role: 'group',
        'aria-label': 'Answers',
      });
      for (const c of q.choices) {
        const b = el(
          'button',
          { type: 'button', class: choiceClass(c, q), 'data-choice': c.id },
          el('span', { class: 'label', text: c.label }),
          c.detail ? el('span', { class: 'detail', text: c.detail }) : null,
        );
        b.addEventListener('click', () => send({ choice_id: c.id }, c.label));
        box.append(b);
      }
      card.append(box);
    }

    const withdraw = el('button', {
      type: 'button',
      class: 'ghost',
      'data-action': 'withdraw',
      text: 'Withdraw',
      title: 'Cancel this question; the agent falls back to its own prompt',
    });
    withdraw.addEventListener('click', () => cancel(card, q, msg));
    card.append(el('div', { class: 'card-foot' }, msg, withdraw));
    return card;
  }

  function setBusy(card, busy) {
    card.setAttribute('aria-busy', busy ? 'true' : 'false');
    for (const b of card.querySelectorAll('button, textarea')) b.disabled = busy;
  }

  async function respond(card, q, msg, responseId, answer, what) {
    if (card.getAttribute('aria-busy') === 'true') return;
    setBusy(card, true);
    msg.textContent = '';
    const body = Object.assign({ request_digest: q.request_digest, response_id: responseId }, answer);
    const r = await api('POST', `/ui/api/interactions/${encodeURIComponent(q.id)}/respond`, body);
    finish(card, q, msg, r, `Sent “${what}”.`);
  }

  async function cancel(card, q, msg) {
    if (card.getAttribute('aria-busy') === 'true') return;
    setBusy(card, true);
    msg.textContent = '';
    const r = await api('POST', `/ui/api/interactions/${encodeURIComponent(q.id)}/cancel`, {});
    finish(card, q, msg, r, 'Withdrawn; the agent falls back to its own prompt.');
  }

  function finish(card, q, msg, r, okText) {
    if (r.ok) {
      state.acted.add(q.id);
      notify(okText, 'ok');
      refresh();
      return;
    }
    const text = explain(r);
    const stale = ['already_answered', 'not_pending', 'digest_mismatch'].includes(r.data.code);
    if (stale) {
      // The question ended or changed elsewhere: say so, and show the current state.
      state.acted.add(q.id);
      notify(text);
      refresh();
    } else {
      setBusy(card, false);
    }
    msg.textContent = text;
  }

  function announceGone(id, history) {
    const h = history.find((x) => x.id === id);
    if (!h) return;
    const what = `“${short(h.prompt, 60)}”`;
    let text;
    if (h.status === 'answered') {
      const by = h.response ? h.response.source : 'another surface';
      text = `${what} was answered elsewhere (from ${by}).`;
    } else if (h.status === 'expired') {
      text = `${what} expired.`;
    } else if (h.status === 'superseded') {
      text = `${what} was replaced by a newer version.`;
    } else {
      text = `${what} was withdrawn.`;
    }
    notify(text, 'ok');
  }

  // ---- history ------------------------------------------------------------------------------

  function outcome(h) {
    const r = h.response;
    if (h.status === 'answered' && r) {
      const answer = r.text !== null && r.text !== undefined ? `“${r.text}”` : r.choice_label || r.choice_id;
      return el('p', { class: 'outcome' }, el('strong', { text: answer }), ` via ${r.source}`);
    }
    const text = {
      expired: 'Nobody answered in time.',
      cancelled: 'Withdrawn, or the agent stopped waiting.',
      superseded: 'Replaced by a newer version of the question.',
    }[h.status];
    return el('p', { class: 'outcome', text: text || h.status });
  }

  function renderHistory(items) {
    const list = $('history');
    list.replaceChildren(
      ...items.map((h) => {
        const ended = h.answered_at || h.updated_at;
        const m = meta(
          h,
          el('span', {
            class: 'status',
            'data-status': h.status,
            text: STATUS_LABEL[h.status] || h.status,
          }),
        );
        m.append(el('span', { class: 'left', 'data-ago': ended, title: new Date(ended).toLocaleString() }));
        return el(
          'li',
          { class: 'card', 'data-id': h.id, 'data-status': h.status },
          m,
          promptEl(h, null),
          outcome(h),
        );
      }),
    );
    $('history-empty').hidden = items.length > 0;
  }

  // ---- rendering ----------------------------------------------------------------------------

  function render(data) {
    const serverNow = Date.parse(data.server_time);
    if (!Number.isNaN(serverNow)) state.skew = serverNow - Date.now();
    const list = $('pending');
    const live = new Set();
    data.pending.forEach((q, i) => {
      live.add(q.id);
      let card = state.cards.get(q.id);
      if (!card) {
        card = buildCard(q);
        state.cards.set(q.id, card);
      }
      // Newest first; existing cards are never moved (that would drop keyboard focus).
      if (list.children[i] !== card) list.insertBefore(card, list.children[i] || null);
    });
    for (const [id, card] of state.cards) {
      if (live.has(id)) continue;
      const index = Array.prototype.indexOf.call(list.children, card);
      const hadFocus = card.contains(document.activeElement);
      card.remove();
      state.cards.delete(id);
      if (!state.acted.has(id) && state.loaded) announceGone(id, data.history);
      if (hadFocus) {
        const next = list.children[index] || list.children[index - 1];
        const target = next && next.querySelector('button, textarea');
        (target || $('main')).focus();
      }
    }
    const n = data.pending.length;
    $('pending-count').textContent = String(n);
    $('pending-count').dataset.n = String(n);
    $('empty').hidden = n > 0;
    document.title = n > 0 ? `(${n}) agentnotify` : 'agentnotify';
    renderHistory(data.history);
    browserAlerts(data.pending);
    tick();
    state.loaded = true;
  }

  let inflight = null;
  let again = false;
  // Coalesces bursts of events into at most one fetch in flight plus one after it.
  async function refresh() {
    if (state.signedOut) return;
    if (inflight) {
      again = true;
      return inflight;
    }
    inflight = (async () => {
      do {
        again = false;
        const r = await api('GET', '/ui/api/interactions');
        if (r.ok) render(r.data);
        else if (r.status !== 401) setLive('off', r.status === 0 ? 'Offline' : 'Error');
      } while (again && !state.signedOut);
    })();
    try {
      await inflight;
    } finally {
      inflight = null;
    }
  }

  // ---- browser notifications ----------------------------------------------------------------

  // A new question while the page is open raises a browser notification (once permission is
  // granted: it is asked for at the first click on the page); it closes once the question
  // leaves pending. Questions already there when the page loaded are on screen: no alert.
  const alerts = { seen: new Set(), shown: new Map(), primed: false };
  function browserAlerts(pending) {
    if (!('Notification' in window)) return;
    const live = new Set(pending.map((q) => q.id));
    for (const [id, n] of alerts.shown) {
      if (!live.has(id)) {
        n.close();
        alerts.shown.delete(id);
      }
    }
    const fresh = pending.filter((q) => !alerts.seen.has(q.id));
    fresh.forEach((q) => alerts.seen.add(q.id));
    if (!alerts.primed) {
      alerts.primed = true;
      return;
    }
    if (Notification.permission !== 'granted') return;
    for (const q of fresh) {
      const who = q.agent ? q.agent.charAt(0).toUpperCase() + q.agent.slice(1) : 'The agent';
      const n = new Notification(`${who} needs your answer${q.project ? ' in ' + q.project : ''}`, {
        body: short(q.prompt, 180),
        tag: `agentnotify-${q.id}`,
        requireInteraction: q.kind === 'permission',
      });
      n.onclick = () => {
        window.focus();
        n.close();
      };
      alerts.shown.set(q.id, n);
    }
  }
  document.addEventListener(
    'click',
    () => {
      if ('Notification' in window && Notification.permission === 'default') {
        Notification.requestPermission();
      }
    },
    { once: true },
  );

  // ---- live updates -------------------------------------------------------------------------

  function connect() {
    if (state.signedOut) return;
    const es = new EventSource('/ui/api/events');
    state.es = es;
    es.addEventListener('ready', () => {
      setLive('on');
      refresh();
    });
    es.addEventListener('interaction', () => refresh());
    es.addEventListener('error', () => {
      if (es.readyState === EventSource.CLOSED) {
        // Refused outright (signed out, or too many tabs): find out which, then retry.
        setLive('off');
        api('GET', '/ui/api/interactions').then((r) => {
          if (r.status !== 401) setTimeout(connect, 5000);
        });
      } else {
        setLive('connecting');
      }
    });
  }

  // ---- tabs ---------------------------------------------------------------------------------

  function select(tab) {
    for (const t of document.querySelectorAll('[role="tab"]')) {
      const on = t === tab;
      t.setAttribute('aria-selected', on ? 'true' : 'false');
      t.tabIndex = on ? 0 : -1;
      $(t.getAttribute('aria-controls')).hidden = !on;
    }
  }

  function setupTabs() {
    const tabs = Array.from(document.querySelectorAll('[role="tab"]'));
    for (const t of tabs) {
      t.addEventListener('click', () => select(t));
      t.addEventListener('keydown', (e) => {
        const i = tabs.indexOf(t);
        let j = -1;
        if (e.key === 'ArrowRight') j = (i + 1) % tabs.length;
        if (e.key === 'ArrowLeft') j = (i - 1 + tabs.length) % tabs.length;
        if (j >= 0) {
          e.preventDefault();
          select(tabs[j]);
          tabs[j].focus();
        }
      });
    }
  }

  function start() {
    setupTabs();
    $('notice-close').addEventListener('click', () => ($('notice').hidden = true));
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) refresh();
    });
    setInterval(tick, 1000);
    refresh();
    connect();
  }

  start();
})();

// agentnotify web UI. Plain DOM, no framework, no build step. Everything the server sends is
// put on the page as text (never parsed as HTML), so a prompt cannot inject markup.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);

  const KIND_LABEL = {
    permission: 'Permission',
    single_choice: 'Choice',
    multi_choice: 'Choose several',
    text: 'Question',
  };
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
    session: '', // the session token; kept in sessionStorage (this origin, this tab) only
    stream: null, // AbortController of the open event stream
    noticeTimer: 0,
  };
  // Where the session token lives: sessionStorage is scoped to this origin, port included,
  // so no other server on 127.0.0.1 can read it (a cookie would be sent to all of them).
  const SESSION_KEY = 'agentnotify.session';

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
      credentials: 'omit',
      cache: 'no-store',
      headers: { Accept: 'application/json' },
    };
    if (state.session) init.headers['X-Agentnotify-Session'] = state.session;
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
        if (card) for (const b of card.querySelectorAll('button, textarea, input')) b.disabled = true;
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
      case 'link_expired':
        return 'This link has expired or was already used (each works once, within 2 minutes). Run agentnotify ui in a terminal for a fresh one.';
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

  function signedOut(why) {
    if (state.signedOut) return;
    state.signedOut = true;
    state.session = '';
    try {
      sessionStorage.removeItem(SESSION_KEY);
    } catch (_) {
      // Storage disabled: nothing was kept.
    }
    if (state.stream) state.stream.abort();
    if (why) {
      $('signin-why').textContent = why;
      $('signin-why').hidden = false;
    }
    setLive('off', 'Signed out');
    $('signin').hidden = false;
    $('panel-pending').hidden = true;
    $('panel-history').hidden = true;
    document.querySelector('.tabs').hidden = true;
  }

  // ---- rendered text (SPEC §13.2) -----------------------------------------------------------
  // The server cuts every displayed string into segments with the model's one rendering:
  // plain text, code points shown by name (`⟨U+202E⟩`: controls, bidi controls, zero-width
  // and other invisible characters) and words that mix scripts. The page only styles them;
  // it has no Unicode tables of its own, and the raw strings of the view are never shown.

  // The segments as DOM nodes: text nodes, a named code point, a marked word.
  function segs(list) {
    const f = document.createDocumentFragment();
    for (const s of list || []) {
      if (s.kind === 'escaped') {
        f.append(
          el('span', {
            class: 'cp',
            title: `${s.code_point}: an invisible or control character, shown by its code`,
            text: s.text,
          }),
        );
      } else if (s.kind === 'mixed_script_word') {
        f.append(
          el('mark', {
            class: 'mixed',
            title: `This word mixes scripts: ${s.scripts.join(', ')}`,
            text: s.text,
          }),
        );
      } else {
        f.append(document.createTextNode(s.text));
      }
    }
    return f;
  }

  // The segments as one string (already rendered: safe to show as text).
  function shown(list) {
    return (list || []).map((s) => s.text).join('');
  }

  // A note under the question naming every word that mixes scripts, once.
  function mixedNote(q) {
    const d = q.display;
    const all = [d.prompt, d.body || []];
    for (const c of d.choices) all.push(c.label, c.detail || []);
    const seen = new Map();
    for (const list of all) {
      for (const s of list) if (s.kind === 'mixed_script_word') seen.set(s.text, s.scripts);
    }
    if (!seen.size) return null;
    return el(
      'ul',
      { class: 'mixed-note' },
      ...Array.from(seen, ([word, scripts]) =>
        el('li', {}, el('mark', { class: 'mixed', text: word }), ` mixes scripts: ${scripts.join(', ')}`),
      ),
    );
  }

  // The body (what actually runs) in a monospace block under the prompt: wrapped, scrollable
  // inside the card, never cut, with its line count on top.
  function bodyEl(q) {
    if (!q.display.body) return null;
    const n = q.display.body_lines;
    const more = el('span', { class: 'more' });
    const pre = el(
      'pre',
      { class: 'body-text', tabindex: 0, 'aria-label': `What runs, ${n === 1 ? '1 line' : `${n} lines`}` },
      segs(q.display.body),
    );
    const fig = el(
      'figure',
      { class: 'body' },
      el('figcaption', {}, el('span', { class: 'lines', text: n === 1 ? '1 line' : `${n} lines` }), more),
      pre,
    );
    // Say so when the block scrolls, so a tail below the fold is not missed.
    if (window.ResizeObserver) {
      new ResizeObserver(() => {
        const over = pre.scrollHeight > pre.clientHeight + 1;
        fig.toggleAttribute('data-overflows', over);
        more.textContent = over ? ' · scroll inside to read it all' : '';
      }).observe(pre);
    }
    return fig;
  }

  // The answer the broker recorded, in words: “Allow once”, “Lint”, “Other text”.
  function recordedAnswer(q) {
    const r = q.response;
    if (!r) return '';
    const label = (id) => {
      const c = q.display.choices.find((x) => x.id === id);
      return `“${c ? shown(c.label) : id}”`;
    };
    const parts = [];
    if (r.choice_id) parts.push(label(r.choice_id));
    for (const id of r.choice_ids || []) parts.push(label(id));
    if (r.text !== null && r.text !== undefined) parts.push(`“${short(shown(r.text_display), 60)}”`);
    return parts.join(', ');
  }

  // What to tell after a 200: the broker's record decides, not what this page tried to send
  // (after a lost reply and a retry, the first answer may be the one that counts).
  function sentText(record, answer) {
    const r = record && record.response;
    if (!r) return 'Sent.';
    const same =
      (r.choice_id || null) === (answer.choice_id || null) &&
      JSON.stringify(r.choice_ids || null) === JSON.stringify(answer.choice_ids || null) &&
      (r.text === undefined ? null : r.text) === (answer.text === undefined ? null : answer.text);
    const what = recordedAnswer(record);
    return same ? `Sent ${what}.` : `The broker had already recorded an earlier answer from this page: ${what}.`;
  }

  // ---- pending cards ------------------------------------------------------------------------

  function meta(q, extra) {
    const m = q.meta_display;
    const agent = el('span', { class: 'agent' }, segs(m.agent));
    if (m.agent_instance) agent.append(' (', segs(m.agent_instance), ')');
    return el(
      'div',
      { class: 'meta' },
      extra,
      agent,
      m.project ? el('span', { class: 'project' }, segs(m.project)) : null,
    );
  }

  // A permission prompt without a body is the command itself (records from before bodies):
  // monospace. With a body, the prompt is a one-line summary and the body is the code.
  function promptEl(q, id) {
    const tag = q.kind === 'permission' && !q.display.body ? 'pre' : 'p';
    return el(tag, { class: 'prompt', id }, segs(q.display.prompt));
  }

  function choiceClass(c, q) {
    if (q.kind === 'permission' && ALLOW_IDS.has(c.id)) return 'btn allow';
    if (q.kind === 'permission' && DENY_IDS.has(c.id)) return 'btn deny';
    return 'btn';
  }

  // ---- click guard ---------------------------------------------------------------------------
  // A click must land on a question the person read. Like a browser's permission prompt, a
  // card ignores pointer clicks for GUARD_MS after it appears or moves (a card above it came
  // or went, a message opened above the list). Keyboard answers are deliberate and pass.

  const GUARD_MS = 1000;
  const tops = new WeakMap(); // card -> its last known offset from the top of the page
  const guards = new WeakMap(); // card -> {until, timer}

  function docTop(e) {
    let top = 0;
    for (let n = e; n; n = n.offsetParent) top += n.offsetTop;
    return top; // offsetTop ignores transforms, so the arrival animation does not count
  }

  function arm(card) {
    const old = guards.get(card);
    if (old) clearTimeout(old.timer);
    card.setAttribute('data-guard', '');
    const timer = setTimeout(() => card.removeAttribute('data-guard'), GUARD_MS);
    guards.set(card, { until: performance.now() + GUARD_MS, timer });
  }

  // Arms every card that is new or whose place on the page changed since the last look.
  function guardMoved() {
    for (const card of state.cards.values()) {
      if (!card.isConnected) continue;
      const top = docTop(card);
      if (tops.get(card) !== top) {
        tops.set(card, top);
        arm(card);
      }
    }
  }

  function guarded(card, e) {
    const g = guards.get(card);
    return e.detail > 0 && g !== undefined && performance.now() < g.until;
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
    const body = bodyEl(q);
    if (body) card.append(body);
    const note = mixedNote(q);
    if (note) card.append(note);

    const msg = el('p', { class: 'card-msg', role: 'status' });
    // One idempotency key per question: a retry after a lost reply replays, never doubles.
    const responseId = newId();
    const send = (answer) => respond(card, q, msg, responseId, answer);

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
        send({ text });
      });
      ta.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
          e.preventDefault();
          form.requestSubmit();
        }
      });
      card.append(form);
    } else if (q.kind === 'multi_choice') {
      card.append(multiChoice(q, msg, send));
    } else {
      card.append(choiceButtons(q, send));
      if (q.allow_other) card.append(otherBox(q, msg, (text) => send({ text })));
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
    // Seen first (capture), so a guarded click reaches no button and submits no form.
    card.addEventListener(
      'click',
      (e) => {
        if (!e.target.closest('button') || !guarded(card, e)) return;
        e.preventDefault();
        e.stopPropagation();
        msg.textContent = 'This question just appeared or moved. Read it, then click again.';
      },
      true,
    );
    return card;
  }

  // One button per choice: a click answers.
  function choiceButtons(q, send) {
    const stacked = q.choices.some((c) => c.detail) || q.choices.length > 4;
    const box = el('div', {
      class: 'choices' + (stacked ? ' stacked' : ''),
      role: 'group',
      'aria-label': 'Answers',
    });
    for (const c of q.display.choices) {
      const b = el(
        'button',
        { type: 'button', class: choiceClass(c, q), 'data-choice': c.id },
        el('span', { class: 'label' }, segs(c.label)),
        c.detail ? el('span', { class: 'detail' }, segs(c.detail)) : null,
      );
      b.addEventListener('click', () => send({ choice_id: c.id }));
      box.append(b);
    }
    return box;
  }

  // "Other": a text box under the choices; `submit(text)` sends it. `optional`: Enter also
  // submits with the box empty (a multi-choice answer may be ticks alone).
  function otherBox(q, msg, submit, optional) {
    const max = q.other_max_length || 500;
    const input = el('input', {
      type: 'text',
      id: `o-${q.id}`,
      name: 'other',
      maxlength: max,
      autocomplete: 'off',
      placeholder: 'Type another answer',
    });
    const form = el(
      'form',
      { class: 'other-answer', novalidate: true },
      el('label', { for: `o-${q.id}`, text: `Other (up to ${max} characters)` }),
      el(
        'div',
        { class: 'text-row' },
        input,
        el('button', { type: 'submit', class: 'btn', 'data-action': 'send-other', text: 'Send' }),
      ),
    );
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      if (!optional && !input.value.trim()) {
        msg.textContent = 'Type your answer first.';
        input.focus();
        return;
      }
      submit(input.value);
    });
    return form;
  }

  function bounds(min, max) {
    return min === max ? `exactly ${min}` : `${min} to ${max}`;
  }

  // Several choices at once: a checkbox per choice, a hint of the bounds, "Other" where
  // offered (it counts as one), and one Send button.
  function multiChoice(q, msg, send) {
    const min = q.min_selections || 1;
    const max = q.max_selections || q.choices.length;
    const other = q.allow_other ? ' (an Other answer counts as one)' : '';
    const hint = el('p', { class: 'hint', id: `h-${q.id}`, text: `Choose ${bounds(min, max)}${other}.` });
    const boxes = q.display.choices.map((c) =>
      el(
        'label',
        { class: 'check' },
        el('input', { type: 'checkbox', value: c.id, 'data-choice': c.id, 'aria-describedby': `h-${q.id}` }),
        el(
          'span',
          { class: 'check-text' },
          el('span', { class: 'label' }, segs(c.label)),
          c.detail ? el('span', { class: 'detail' }, segs(c.detail)) : null,
        ),
      ),
    );
    const counter = el('span', { class: 'counter', 'aria-live': 'polite' });
    const chosen = () => boxes.map((b) => b.querySelector('input')).filter((i) => i.checked);
    let otherInput = null;
    const count = () => chosen().length + (otherInput && otherInput.value.trim() ? 1 : 0);
    const update = () => {
      const n = count();
      counter.textContent = `${n} chosen`;
      counter.toggleAttribute('data-over', n > max);
    };
    const submit = () => {
      const n = count();
      if (n < min || n > max) {
        msg.textContent = `Choose ${bounds(min, max)}${other}; ${n} chosen.`;
        return;
      }
      const answer = {};
      const ids = chosen().map((i) => i.value);
      if (ids.length) answer.choice_ids = ids;
      if (otherInput && otherInput.value.trim()) answer.text = otherInput.value;
      send(answer);
    };
    const fieldset = el(
      'fieldset',
      { class: 'multi' },
      el('legend', { class: 'sr-only', text: 'Answers' }),
      hint,
      el('div', { class: 'checks' }, ...boxes),
    );
    if (q.allow_other) {
      const box = otherBox(q, msg, submit, true);
      otherInput = box.querySelector('input');
      otherInput.addEventListener('input', update);
      box.querySelector('button').remove(); // one Send for the whole answer
      fieldset.append(box);
    }
    for (const b of boxes) b.querySelector('input').addEventListener('change', update);
    const sendBtn = el('button', { type: 'button', class: 'btn primary', 'data-action': 'send', text: 'Send answer' });
    sendBtn.addEventListener('click', submit);
    fieldset.append(el('div', { class: 'text-row' }, counter, sendBtn));
    update();
    return fieldset;
  }

  function setBusy(card, busy) {
    card.setAttribute('aria-busy', busy ? 'true' : 'false');
    for (const b of card.querySelectorAll('button, textarea, input')) b.disabled = busy;
  }

  async function respond(card, q, msg, responseId, answer) {
    if (card.getAttribute('aria-busy') === 'true') return;
    setBusy(card, true);
    msg.textContent = '';
    const body = Object.assign({ request_digest: q.request_digest, response_id: responseId }, answer);
    const r = await api('POST', `/ui/api/interactions/${encodeURIComponent(q.id)}/respond`, body);
    finish(card, q, msg, r, r.ok ? sentText(r.data.interaction, answer) : '');
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
    const what = `“${short(shown(h.display.prompt), 60)}”`;
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
      return el('p', { class: 'outcome' }, el('strong', { text: recordedAnswer(h) }), ` via ${r.source}`);
    }
    const text = {
      expired: 'Nobody answered in time.',
      cancelled: 'Withdrawn, or the agent stopped waiting.',
      superseded: 'Replaced by a newer version of the question.',
    }[h.status];
    return el('p', { class: 'outcome', text: text || h.status });
  }

  // A past question's body, folded away (it can be long) but whole when opened.
  function historyBody(h) {
    if (!h.display.body) return null;
    const n = h.display.body_lines;
    return el(
      'details',
      { class: 'body' },
      el('summary', { text: `Show the body (${n === 1 ? '1 line' : `${n} lines`})` }),
      el('pre', { class: 'body-text' }, segs(h.display.body)),
    );
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
          historyBody(h),
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
    const live = new Set(data.pending.map((q) => q.id));
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
    // Oldest first, and a new question joins at the end: nothing is ever inserted above the
    // card being read, and existing cards are never moved (that would drop keyboard focus).
    for (const q of data.pending.slice().reverse()) {
      if (state.cards.has(q.id)) continue;
      const card = buildCard(q);
      state.cards.set(q.id, card);
      list.append(card);
    }
    guardMoved();
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

  // Server-sent events read through fetch(), because EventSource cannot send the session
  // header (and the token must not travel in a URL).
  async function connect() {
    if (state.signedOut) return;
    const ctrl = new AbortController();
    state.stream = ctrl;
    let res;
    try {
      res = await fetch('/ui/api/events', {
        credentials: 'omit',
        cache: 'no-store',
        headers: { Accept: 'text/event-stream', 'X-Agentnotify-Session': state.session },
        signal: ctrl.signal,
      });
    } catch (_) {
      return reconnect(ctrl, 'off', 2000);
    }
    if (res.status === 401) return signedOut();
    // Refused for another reason (too many tabs): retry in a while.
    if (!res.ok || !res.body) return reconnect(ctrl, 'off', 5000);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value.replace(/\r\n?/g, '\n');
        let end;
        while ((end = buf.indexOf('\n\n')) >= 0) {
          onFrame(buf.slice(0, end));
          buf = buf.slice(end + 2);
        }
      }
    } catch (_) {
      // The connection broke; reconnect below.
    }
    // Ended: the broker stopped, the connection broke, or the session ended.
    reconnect(ctrl, 'connecting', 2000);
  }

  function onFrame(frame) {
    let event = 'message';
    for (const line of frame.split('\n')) {
      if (line.startsWith('event:')) event = line.slice(6).trim();
    }
    if (event === 'ready') {
      setLive('on');
      refresh();
    } else if (event === 'interaction') {
      refresh();
    }
  }

  function reconnect(ctrl, mode, delay) {
    if (state.signedOut || ctrl.signal.aborted) return;
    setLive(mode);
    // The list call tells a signed-out page so (401) before the stream is tried again.
    refresh();
    setTimeout(connect, delay);
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

  function stored() {
    try {
      return sessionStorage.getItem(SESSION_KEY) || '';
    } catch (_) {
      return '';
    }
  }

  // A one-time link carries its secret in the fragment (#t=…), which the browser never
  // sends anywhere: it is taken off the address (and history) at once and traded for a
  // session token. A spent link in a tab that is already signed in just shows the page.
  async function signIn() {
    const m = /^#t=([A-Za-z0-9_-]+)$/.exec(location.hash);
    if (location.hash) history.replaceState(null, '', location.pathname + location.search);
    if (m) {
      const r = await api('POST', '/ui/api/session', { link: m[1] });
      if (r.ok && r.data.session) {
        state.session = r.data.session;
        try {
          sessionStorage.setItem(SESSION_KEY, state.session);
        } catch (_) {
          // Storage disabled: the session lasts as long as this page.
        }
        return true;
      }
      state.session = stored();
      if (state.session) return true;
      signedOut(explain(r));
      return false;
    }
    state.session = stored();
    if (!state.session) signedOut();
    return Boolean(state.session);
  }

  async function start() {
    // A link opened in a tab already showing the page changes only the fragment: start over.
    window.addEventListener('hashchange', () => {
      if (location.hash.startsWith('#t=')) location.reload();
    });
    setupTabs();
    $('notice-close').addEventListener('click', () => ($('notice').hidden = true));
    if (!(await signIn())) return;
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) refresh();
    });
    setInterval(tick, 1000);
    // Anything that resizes the page or a card may move the cards below it.
    if (window.ResizeObserver) new ResizeObserver(guardMoved).observe(document.body);
    window.addEventListener('resize', guardMoved);
    refresh();
    connect();
  }

  start();
})();

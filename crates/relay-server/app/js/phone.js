// The phone's protocol (docs/RELAY.md "The phone app's protocol"), shared by the page and
// the service worker: pairing, opening and checking envelopes, sealing answers, checking
// verdicts. The installation's keys come only from the pairing code, never from the Relay:
// anything that does not verify under them is "not from your computer".

import * as c from './crypto.js';

const CODE_PREFIX = 'anp1.';
const CONTRACT_VERSION = '1';
const INTERACTION_REQUEST = 'interaction-request';
const ENVELOPE_SIG = 'agentnotify/envelope-sig/v1';
const VERDICT_SIG = 'agentnotify/verdict-sig/v1';

/** The Relay this app was loaded from (two levels above js/phone.js): same origin. */
export const RELAY_BASE = new URL('../../', import.meta.url);

/** A failure the page can explain; `code` picks the words. */
export class PhoneError extends Error {
  constructor(code, message, extra) {
    super(message);
    this.code = code;
    Object.assign(this, extra || {});
  }
}

export const NOT_FROM_YOUR_COMPUTER = 'not_from_your_computer';

const forged = (why) =>
  new PhoneError(
    NOT_FROM_YOUR_COMPUTER,
    'A message arrived that your computer did not send (it does not carry your computer’s signature). It was not shown and cannot be answered.',
    { why },
  );

// ---- pairing codes --------------------------------------------------------------------------

/** The pairing code in a link (`…/app/#pair=anp1.…`) or given as is; null if none. */
export function codeFrom(text) {
  const s = String(text || '').trim();
  const m = /(?:^|[#&])pair=([^&\s]+)/.exec(s);
  const code = m ? decodeURIComponent(m[1]) : s;
  return code.startsWith(CODE_PREFIX) ? code : null;
}

/** Decodes and checks a pairing code (it never leaves this phone). */
export function decodeCode(code, now = Date.now()) {
  const bad = () =>
    new PhoneError('bad_code', 'This is not an agentnotify pairing code. Copy the whole link that `agentnotify relay pair` prints.');
  if (!String(code).startsWith(CODE_PREFIX)) throw bad();
  let v;
  try {
    v = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(c.unb64u(code.slice(CODE_PREFIX.length))));
  } catch (_) {
    throw bad();
  }
  const str = (k) => typeof v?.[k] === 'string' && v[k].length > 0;
  if (!['installation_id', 'installation_public_key', 'pairing_secret'].every(str)) throw bad();
  if (!str('installation_signing_key') || !str('expires_at')) {
    throw new PhoneError(
      'old_code',
      'This pairing code comes from an older agentnotify that does not sign its questions. Update agentnotify on your computer and pair again.',
    );
  }
  try {
    c.decodeKey(v.installation_public_key);
    c.decodeKey(v.installation_signing_key);
  } catch (_) {
    throw bad();
  }
  if (str('expires_at') && Date.parse(v.expires_at) <= now) {
    throw new PhoneError('pairing_expired', 'This pairing code expired. Run `agentnotify relay pair` again for a fresh one.');
  }
  return v;
}

// ---- talking to the Relay -------------------------------------------------------------------

/** One Relay request; network failures and a removed device become PhoneErrors. */
export async function api(device, method, path, body, signal) {
  const headers = { Accept: 'application/json' };
  if (device) headers.Authorization = `Bearer ${device.device_token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(new URL(path, RELAY_BASE), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
      credentials: 'omit',
      signal,
    });
  } catch (e) {
    if (e && e.name === 'AbortError') throw e;
    throw new PhoneError('unreachable', 'The Relay is unreachable. Check this phone’s connection; the app keeps trying.');
  }
  let data = {};
  try {
    data = (await res.json()) || {};
  } catch (_) {
    data = {};
  }
  if (res.status === 401 && device) throw removed();
  if (res.status === 429) {
    throw new PhoneError('rate_limited', 'The Relay is busy (too many requests); trying again shortly.');
  }
  return { ok: res.ok, status: res.status, data };
}

export const removed = () =>
  new PhoneError(
    'device_removed',
    'This phone was removed from your computer’s devices (or its pairing was reset). Pair it again with a fresh code from `agentnotify relay pair`.',
  );

const PAIR_REFUSED = {
  pairing_expired: 'This pairing code expired. Run `agentnotify relay pair` again for a fresh one.',
  pairing_used: 'This pairing code was already used by another device. Each code pairs one device: run `agentnotify relay pair` again.',
  pairing_refused: 'The Relay does not know this pairing code. Run `agentnotify relay pair` again for a fresh one.',
};

/** Pairs with the installation in `code`; returns the device record to keep. */
export async function pair(code, name) {
  const info = decodeCode(code);
  const { privateKey, publicBytes } = await c.generateKeyPair();
  const publicKey = c.b64u(publicBytes);
  const r = await api(null, 'POST', 'v1/devices', {
    installation_id: info.installation_id,
    pairing_token: await c.pairingToken(info.pairing_secret),
    public_key: publicKey,
    name,
    proof: await c.deviceProof(info.pairing_secret, info.installation_id, publicKey),
  });
  if (!r.ok) {
    const known = PAIR_REFUSED[r.data.code];
    throw new PhoneError(r.data.code || 'pairing_failed', known || r.data.error || `The Relay answered HTTP ${r.status}.`);
  }
  return {
    relay_url: info.relay_url || RELAY_BASE.href,
    installation_id: info.installation_id,
    installation_public_key: info.installation_public_key,
    installation_signing_key: info.installation_signing_key,
    device_id: r.data.device_id,
    device_token: r.data.device_token,
    name,
    privateKey,
    public_key: publicKey,
    key_id: await c.keyId(publicBytes),
    paired_at: new Date().toISOString(),
  };
}

// ---- questions ------------------------------------------------------------------------------

/** Checks an envelope's signature and seal and returns the question inside. */
export async function openEnvelope(device, e) {
  if (!e || typeof e !== 'object') throw forged('not an envelope');
  const fields = ['event_id', 'key_id', 'expires_at', 'sealed'];
  if (!fields.every((k) => typeof e[k] === 'string')) throw forged('envelope fields missing');
  if (e.installation_id !== device.installation_id || e.device_id !== device.device_id) {
    throw forged('addressed to another installation or device');
  }
  if (e.key_id !== device.key_id) throw forged('sealed to another key');
  const signed = [ENVELOPE_SIG, device.installation_id, device.device_id, e.key_id, e.event_id, e.expires_at, e.sealed];
  if (!(await c.verify(device.installation_signing_key, signed, e.signature))) throw forged('bad or missing signature');
  const binding = {
    installation_id: device.installation_id,
    device_id: device.device_id,
    key_id: device.key_id,
    event_id: e.event_id,
    expires_at: e.expires_at,
  };
  let payload;
  try {
    const bytes = await c.open(device.privateKey, c.decodeKey(device.public_key), binding, e.sealed);
    payload = JSON.parse(new TextDecoder().decode(bytes));
  } catch (_) {
    throw forged('the sealed box does not open');
  }
  const q = payload && payload.interaction;
  if (
    payload.payload_kind !== INTERACTION_REQUEST ||
    payload.contract_version !== CONTRACT_VERSION ||
    !q ||
    `interaction:${q.id}` !== e.event_id ||
    q.expires_at !== e.expires_at
  ) {
    throw forged('payload and envelope disagree');
  }
  return { ...q, event_id: e.event_id };
}

/** A fresh response id: one per question, so a retry replays instead of doubling. */
export function newResponseId() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return 'app-' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

const REFUSED = {
  already_answered: 'This question was already answered elsewhere.',
  question_withdrawn: 'This question was settled elsewhere (answered at the computer, or withdrawn).',
  question_expired: 'This question expired before the answer arrived.',
  digest_mismatch: 'The question changed on your computer; this answer was not applied.',
  not_pending: 'This question is no longer waiting for an answer.',
  device_not_paired: 'Your computer does not list this phone as paired; pair it again.',
  device_revoked: 'This phone was removed on your computer; pair it again.',
  expired: 'This question expired before the answer arrived.',
};

/** Words for a refusal code (the broker's or the Relay's). */
export function refusalText(code, message) {
  return REFUSED[code] || message || 'Your computer refused this answer.';
}

/**
 * Seals `answer` ({choice_id} | {choice_ids, text?} | {text}) to the installation and posts
 * it. Returns what was sent (for checking the verdict) or throws a PhoneError.
 */
export async function sendAnswer(device, q, answer, responseId) {
  const payload = {
    contract_version: CONTRACT_VERSION,
    response_id: responseId,
    interaction_id: q.id,
    request_digest: q.request_digest,
    nonce: q.nonce,
    ...answer,
    installation_id: device.installation_id,
    device_id: device.device_id,
  };
  const instKey = c.decodeKey(device.installation_public_key);
  const keyId = await c.keyId(instKey);
  const binding = {
    installation_id: device.installation_id,
    device_id: device.device_id,
    key_id: keyId,
    event_id: `response:${responseId}`,
    expires_at: q.expires_at,
  };
  const sealed = await c.seal(instKey, binding, new TextEncoder().encode(JSON.stringify(payload)));
  const r = await api(device, 'POST', 'v1/interaction-responses', {
    contract_version: CONTRACT_VERSION,
    response_id: responseId,
    interaction_id: q.id,
    installation_id: device.installation_id,
    device_id: device.device_id,
    sealed,
    key_id: keyId,
    expires_at: q.expires_at,
  });
  const sent = { response_id: responseId, interaction_id: q.id };
  if (r.ok) return sent;
  const code = r.data.code || 'refused';
  // The same answer again (a retry after a lost reply) is not a failure.
  if (code === 'duplicate_response') return sent;
  throw new PhoneError(code, refusalText(code, r.data.error), { relay: true });
}

/** Whether a verdict for `sent` carries the installation's signature. */
export async function verdictIsGenuine(device, sent, v) {
  if (!v || (v.status !== 'accepted' && v.status !== 'refused') || v.response_id !== sent.response_id) return false;
  const signed = [
    VERDICT_SIG,
    device.installation_id,
    device.device_id,
    sent.response_id,
    sent.interaction_id,
    v.status,
    v.code || '',
    v.message || '',
  ];
  return c.verify(device.installation_signing_key, signed, v.signature);
}

/**
 * Long-polls the verdict of `sent` until it is judged (or `signal` aborts). A Relay that
 * answers `pending` at once (it does not hold requests) is asked again after a second, not
 * in a tight loop.
 */
export async function waitVerdict(device, sent, signal) {
  for (;;) {
    const started = Date.now();
    const r = await api(device, 'GET', `v1/interaction-responses/${encodeURIComponent(sent.response_id)}?wait=30`, undefined, signal);
    if (r.ok && r.data.status && r.data.status !== 'pending') return r.data;
    if (!r.ok && r.status !== 404) throw new PhoneError(r.data.code || 'relay_error', r.data.error || `The Relay answered HTTP ${r.status}.`);
    const early = 1000 - (Date.now() - started);
    if (early > 0) await abortableSleep(early, signal);
  }
}

function abortableSleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      reject(new DOMException('aborted', 'AbortError'));
    });
  });
}

/** The envelopes waiting for this device. */
export async function envelopes(device) {
  const r = await api(device, 'GET', 'v1/envelopes');
  if (!r.ok) throw new PhoneError(r.data.code || 'relay_error', r.data.error || `The Relay answered HTTP ${r.status}.`);
  return Array.isArray(r.data.envelopes) ? r.data.envelopes : [];
}

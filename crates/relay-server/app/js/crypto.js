// Sealing (SPEC §8), byte for byte as crates/relay-proto/src/seal.rs: X25519 and HKDF-SHA256
// from WebCrypto, XChaCha20-Poly1305 from the vendored @noble/ciphers. Also the pairing
// proof (relay-proto/src/pairing.rs). Nothing here logs or keeps a key or a plaintext.

import { xchacha20poly1305 } from '../vendor/noble-ciphers/chacha.js';

export const VERSION = 'agentnotify/seal/v1';
const INFO = new TextEncoder().encode(VERSION);
const NONCE_LEN = 24;
const KEY_LEN = 32;
const TAG_LEN = 16;
// PKCS#8 wrapping of a raw X25519 private key (RFC 8410): WebCrypto imports private keys
// only as PKCS#8 or JWK, and JWK would need the public key too.
const PKCS8_X25519 = Uint8Array.from([
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22, 0x04, 0x20,
]);

/** Why a box did not open, in the page's words. */
export class SealError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

const subtle = () => {
  if (!globalThis.crypto || !crypto.subtle) {
    throw new SealError('no_webcrypto', 'This browser has no WebCrypto here (the app needs HTTPS).');
  }
  return crypto.subtle;
};

export function b64u(bytes) {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function unb64u(text) {
  const s = String(text).trim().replace(/=+$/, '').replace(/-/g, '+').replace(/_/g, '/');
  if (/[^A-Za-z0-9+/]/.test(s) || s.length % 4 === 1) throw new SealError('encoding', 'not base64url');
  const bin = atob(s + '='.repeat((4 - (s.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** A 32-byte key from base64url (padding tolerated), as `seal::decode_key`. */
export function decodeKey(text) {
  let k;
  try {
    k = unb64u(text);
  } catch (_) {
    k = null;
  }
  if (!k || k.length !== KEY_LEN) throw new SealError('bad_key', 'a key must be 32 bytes of base64url');
  return k;
}

const utf8 = (s) => new TextEncoder().encode(s);

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** `key_id`: the first 16 hex digits of SHA-256 of a public key. */
export async function keyId(publicBytes) {
  const h = new Uint8Array(await subtle().digest('SHA-256', publicBytes));
  return Array.from(h.slice(0, 8), (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * The associated data: compact JSON [version, installation, device, key id, event id, expiry],
 * as serde_json writes it (JSON.stringify escapes the same way for these strings).
 */
export function aad(b) {
  return utf8(
    JSON.stringify([VERSION, b.installation_id, b.device_id, b.key_id, b.event_id, b.expires_at].map(String)),
  );
}

/** A fresh device key pair: the private key can never be exported, only used. */
export async function generateKeyPair() {
  const pair = await subtle().generateKey({ name: 'X25519' }, false, ['deriveBits']);
  const publicBytes = new Uint8Array(await subtle().exportKey('raw', pair.publicKey));
  return { privateKey: pair.privateKey, publicBytes };
}

/** Imports a raw 32-byte X25519 secret (test vectors only; real keys are generated). */
export async function importSecret(raw, extractable = false) {
  return subtle().importKey('pkcs8', concat(PKCS8_X25519, raw), { name: 'X25519' }, extractable, [
    'deriveBits',
  ]);
}

async function importPublic(raw) {
  return subtle().importKey('raw', raw, { name: 'X25519' }, true, []);
}

/** X25519, refusing a low-order point (WebCrypto throws on an all-zero secret). */
async function agree(privateKey, publicRaw) {
  try {
    const pub = await importPublic(publicRaw);
    return new Uint8Array(await subtle().deriveBits({ name: 'X25519', public: pub }, privateKey, 256));
  } catch (_) {
    throw new SealError('weak_key', 'the key agreement produced no shared secret (invalid public key)');
  }
}

async function boxKey(shared, ephPub, recipientPub) {
  const ikm = await subtle().importKey('raw', shared, 'HKDF', false, ['deriveBits']);
  const bits = await subtle().deriveBits(
    { name: 'HKDF', hash: 'SHA-256', salt: concat(ephPub, recipientPub), info: INFO },
    ikm,
    256,
  );
  return new Uint8Array(bits);
}

/**
 * Seals `plaintext` (bytes) to `recipientPub` (32 bytes) under `binding`. `fixed` (test
 * vectors only) gives the ephemeral secret and nonce; otherwise both are fresh and random.
 */
export async function seal(recipientPub, binding, plaintext, fixed) {
  let eph;
  let ephPub;
  if (fixed) {
    eph = await importSecret(fixed.ephemeralSecret, true);
    const jwk = await subtle().exportKey('jwk', eph);
    ephPub = unb64u(jwk.x);
  } else {
    const pair = await generateKeyPair();
    eph = pair.privateKey;
    ephPub = pair.publicBytes;
  }
  const nonce = fixed ? fixed.nonce : crypto.getRandomValues(new Uint8Array(NONCE_LEN));
  const shared = await agree(eph, recipientPub);
  const key = await boxKey(shared, ephPub, recipientPub);
  const ct = xchacha20poly1305(key, nonce, aad(binding)).encrypt(plaintext);
  return b64u(concat(nonce, ephPub, ct));
}

/** Opens a box sealed to (`privateKey`, `publicBytes`) under `binding`; returns bytes. */
export async function open(privateKey, publicBytes, binding, wire) {
  const raw = unb64u(wire);
  if (raw.length < NONCE_LEN + KEY_LEN + TAG_LEN) throw new SealError('too_short', 'too short to be a sealed box');
  const nonce = raw.slice(0, NONCE_LEN);
  const ephPub = raw.slice(NONCE_LEN, NONCE_LEN + KEY_LEN);
  const ct = raw.slice(NONCE_LEN + KEY_LEN);
  const shared = await agree(privateKey, ephPub);
  const key = await boxKey(shared, ephPub, publicBytes);
  try {
    return xchacha20poly1305(key, nonce, aad(binding)).decrypt(ct);
  } catch (_) {
    throw new SealError('open', 'the sealed box does not open: it was altered, moved, or sealed to another key');
  }
}

/**
 * Whether `signature` (base64url) is the Ed25519 signature by `signingKey` (base64url, 32
 * bytes) over the compact JSON array `fields`. Any malformed input is simply "no".
 */
export async function verify(signingKey, fields, signature) {
  try {
    const key = await subtle().importKey('raw', decodeKey(signingKey), { name: 'Ed25519' }, false, ['verify']);
    const sig = unb64u(signature);
    if (sig.length !== 64) return false;
    return await subtle().verify({ name: 'Ed25519' }, key, sig, utf8(JSON.stringify(fields.map(String))));
  } catch (_) {
    return false;
  }
}

async function hmac(secret, parts) {
  const key = await subtle().importKey('raw', utf8(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await subtle().sign('HMAC', key, concat(...parts.map(utf8))));
}

/** The token that lets a phone register at the Relay (reveals nothing of the secret). */
export async function pairingToken(secret) {
  const h = await subtle().digest('SHA-256', concat(utf8('agentnotify/pair-token/v1\0'), utf8(secret)));
  return b64u(new Uint8Array(h));
}

/** The phone's proof that it holds the pairing secret and chose `devicePublicKey`. */
export async function deviceProof(secret, installationId, devicePublicKey) {
  return b64u(await hmac(secret, ['agentnotify/device-proof/v1\0', installationId, '\0', devicePublicKey]));
}

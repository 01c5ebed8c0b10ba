#!/usr/bin/env python3
"""Writes tests/data/signature-vectors.json and tests/data/pairing-vectors.json.

An implementation independent of the Rust code (Python `cryptography` for Ed25519, the
standard library for HMAC and SHA-256), so the Rust tests and the phone app check theirs
against someone else's reading of docs/RELAY.md. Ed25519 (RFC 8032) is deterministic, so the
same seeds always give the same signatures.

Re-run from the repository root (needs `pip install cryptography`):

    python3 tests/data/make_signature_vectors.py
"""

import base64
import hashlib
import hmac
import json
import pathlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

HERE = pathlib.Path(__file__).parent


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def compact(fields) -> bytes:
    # The signed message: compact JSON of an array of ASCII strings (JSON.stringify's form).
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=True).encode()


def signer(seed: bytes):
    key = Ed25519PrivateKey.from_private_bytes(seed)
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return key, b64(public)


SEED = bytes(range(0x40, 0x60))
key, public = signer(SEED)

envelope = {
    "installation_id": "5f1e0c3a9b7d4e2f8a6c1b0d9e8f7a6b",
    "device_id": "a1b2c3d4e5f60718293a4b5c6d7e8f90",
    "key_id": "aaa8fff703b50b22",
    "event_id": "interaction:0123456789abcdef0123456789abcdef",
    "expires_at": "2030-01-02T03:04:05.678Z",
    "sealed": "yMnKy8zNzs_Q0dLT1NXW19jZ2tvc3d7fVxR2nRFr92Q2rnS8eT0sMK0ZA8WaxSc4BcfiaYtBDDY-opaque",
}
envelope_message = compact(
    ["agentnotify/envelope-sig/v1"]
    + [envelope[k] for k in ("installation_id", "device_id", "key_id", "event_id", "expires_at", "sealed")]
)

verdicts = []
for name, status, code, message in [
    ("accepted", "accepted", None, None),
    ("refused", "refused", "digest_mismatch", "the answer does not match the question it was sent for"),
]:
    result = {"response_id": "dev-7c3f", "status": status}
    if code:
        result["code"] = code
        result["message"] = message
    msg = compact(
        [
            "agentnotify/verdict-sig/v1",
            envelope["installation_id"],
            envelope["device_id"],
            result["response_id"],
            "0123456789abcdef0123456789abcdef",
            status,
            code or "",
            message or "",
        ]
    )
    verdicts.append(
        {
            "name": name,
            "installation_id": envelope["installation_id"],
            "device_id": envelope["device_id"],
            "interaction_id": "0123456789abcdef0123456789abcdef",
            "result": result,
            "message": msg.decode(),
            "signature": b64(key.sign(msg)),
        }
    )

signatures = {
    "about": "Installation signatures (docs/RELAY.md, 'The phone app's protocol'), produced by an "
    "independent implementation (Python cryptography, Ed25519 RFC 8032; make_signature_vectors.py). "
    "message is the exact UTF-8 signed; keys and signatures are base64url without padding.",
    "signing_seed": b64(SEED),
    "signing_public": public,
    "envelope": {
        "envelope": envelope,
        "message": envelope_message.decode(),
        "signature": b64(key.sign(envelope_message)),
    },
    "verdicts": verdicts,
}

MASTER = "bWFzdGVyLXBhaXJpbmctc2VjcmV0LWZvci12ZWN0b3Jz"
PAIRING_ID = "p1.1893553445.0123456789abcdef"
secret = b64(hmac.new(MASTER.encode(), b"agentnotify/pairing-secret/v1\0" + PAIRING_ID.encode(), hashlib.sha256).digest())
token = b64(hashlib.sha256(b"agentnotify/pair-token/v1\0" + secret.encode()).digest())
DEVICE_KEY = "B6N8vBQgk8i3VdwbEOhstCY3StFqqFPtC9_AsrhtHHw"
proof = b64(
    hmac.new(
        secret.encode(),
        b"agentnotify/device-proof/v1\0" + envelope["installation_id"].encode() + b"\0" + DEVICE_KEY.encode(),
        hashlib.sha256,
    ).digest()
)
pairing = {
    "about": "Pairing (docs/RELAY.md, 'Pairing'), produced by an independent implementation "
    "(Python hmac/hashlib; make_signature_vectors.py). Strings are used as their ASCII bytes.",
    "master_secret": MASTER,
    "pairing_id": PAIRING_ID,
    "pairing_secret": secret,
    "pairing_token": token,
    "installation_id": envelope["installation_id"],
    "device_public_key": DEVICE_KEY,
    "proof": proof,
}

for name, value in [("signature-vectors.json", signatures), ("pairing-vectors.json", pairing)]:
    (HERE / name).write_text(json.dumps(value, indent=2) + "\n")
    print("wrote", HERE / name)

#!/usr/bin/env python3
"""Synthetic App Attest objects (relay.md §5.4), built with pyca/cryptography independently of
Tether, under a throwaway root: Apple does not sign test attestations.

Usage: appattest_fixture.py JSON  — one request, prints one JSON answer.
  {"op": "root", "expired"?}                       -> {"root_pem", "root_key_pem"}
     expired: true makes the root itself valid 2000-01-01..2000-02-01 only
  {"op": "attest", "root_pem", "root_key_pem", "app_id", "challenge_b64", "origin",
   "variant": good|other_root|expired|leaf_signed_by_root|wrong_nonce|wrong_app|development|
              nonzero_counter|credential_mismatch|fido|short_auth_data,
   "flags"?: the authData flags byte (default 0x40),
   "auth_data_length"?: with short_auth_data, authData cut to this many bytes (default 36)}
     (the leaf's nonce is always computed over the authData actually sent)
                                                   -> {"attestation_b64", "key_id_b64", "public_key_b64",
                                                       "leaf_key_pem", "client_data_hash_b64"}
  {"op": "assert", "leaf_key_pem", "app_id", "challenge_b64", "origin", "counter",
   "variant": good|other_key|wrong_app}             -> {"assertion_b64", "client_data_hash_b64"}
"""
import base64
import datetime
import hashlib
import json
import struct
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def canonical(domain, fields):
    out = b""
    for element in [domain.encode()] + fields:
        out += struct.pack(">I", len(element)) + element
    return out


def client_data_hash(challenge_b64, origin):
    return hashlib.sha256(canonical("iterm2-relay-attest", [base64.b64decode(challenge_b64), origin.encode()])).digest()


def cbor(value):
    """The CBOR subset App Attest uses: unsigned ints, bytes, text, arrays, text-keyed maps."""
    def head(major, n):
        if n < 24:
            return bytes([major << 5 | n])
        for info, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
            if n < 1 << (8 * struct.calcsize(fmt)):
                return bytes([major << 5 | info]) + struct.pack(fmt, n)
    if isinstance(value, int):
        return head(0, value)
    if isinstance(value, bytes):
        return head(2, len(value)) + value
    if isinstance(value, str):
        data = value.encode()
        return head(3, len(data)) + data
    if isinstance(value, list):
        return head(4, len(value)) + b"".join(cbor(v) for v in value)
    if isinstance(value, dict):
        return head(5, len(value)) + b"".join(cbor(k) + cbor(v) for k, v in value.items())
    raise TypeError(value)


def name(common):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def certificate(subject, subject_key, issuer, issuer_key, not_before, not_after, extensions=()):
    builder = (x509.CertificateBuilder().subject_name(name(subject)).issuer_name(name(issuer))
               .public_key(subject_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(not_before).not_valid_after(not_after))
    for extension in extensions:
        builder = builder.add_extension(extension, critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()


def window():
    now = datetime.datetime.now(datetime.timezone.utc)
    return now - datetime.timedelta(hours=1), now + datetime.timedelta(days=1)


def root(request):
    key = ec.generate_private_key(ec.SECP256R1())
    start, end = window()
    if request.get("expired"):
        start, end = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc), datetime.datetime(2000, 2, 1, tzinfo=datetime.timezone.utc)
    cert = certificate("Tether Test App Attest Root", key, "Tether Test App Attest Root", key, start, end)
    return {"root_pem": cert.public_bytes(serialization.Encoding.PEM).decode(), "root_key_pem": pem_key(key)}


def attest(request):
    variant = request.get("variant", "good")
    root_key = serialization.load_pem_private_key(request["root_key_pem"].encode(), None)
    if variant == "other_root":
        root_key = ec.generate_private_key(ec.SECP256R1())
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    point = leaf_key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    key_id = hashlib.sha256(point).digest()
    app_id = request["app_id"] if variant != "wrong_app" else "TEAMID.another.app"
    aaguid = b"appattestdevelop" if variant == "development" else b"appattest" + bytes(7)
    counter = 1 if variant == "nonzero_counter" else 0
    credential = key_id if variant != "credential_mismatch" else hashlib.sha256(b"another key").digest()
    flags = bytes([request.get("flags", 0x40)])
    auth_data = hashlib.sha256(app_id.encode()).digest() + flags + struct.pack(">I", counter) + aaguid + struct.pack(">H", 32) + credential
    if variant == "short_auth_data":
        auth_data = auth_data[:request.get("auth_data_length", 36)]
    cdh = client_data_hash(request["challenge_b64"], request["origin"])
    signed_cdh = cdh if variant != "wrong_nonce" else hashlib.sha256(b"another challenge").digest()
    nonce = hashlib.sha256(auth_data + signed_cdh).digest()
    nonce_extension = x509.UnrecognizedExtension(x509.ObjectIdentifier("1.2.840.113635.100.8.2"), bytes.fromhex("3024a1220420") + nonce)
    start, end = window()
    if variant == "expired":
        start, end = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc), datetime.datetime(2000, 2, 1, tzinfo=datetime.timezone.utc)
    intermediate_key = ec.generate_private_key(ec.SECP256R1())
    intermediate = certificate("Tether Test App Attest CA", intermediate_key, "Tether Test App Attest Root", root_key, start, end)
    leaf_issuer_key = root_key if variant == "leaf_signed_by_root" else intermediate_key
    leaf = certificate("leaf", leaf_key, "Tether Test App Attest CA", leaf_issuer_key, start, end, [nonce_extension])
    obj = {"fmt": "fido-u2f" if variant == "fido" else "apple-appattest",
           "attStmt": {"x5c": [leaf.public_bytes(serialization.Encoding.DER), intermediate.public_bytes(serialization.Encoding.DER)],
                       "receipt": b"\x00"},
           "authData": auth_data}
    return {"attestation_b64": base64.b64encode(cbor(obj)).decode(), "key_id_b64": base64.b64encode(key_id).decode(),
            "public_key_b64": base64.b64encode(point).decode(), "leaf_key_pem": pem_key(leaf_key),
            "client_data_hash_b64": base64.b64encode(cdh).decode()}


def assertion(request):
    variant = request.get("variant", "good")
    key = serialization.load_pem_private_key(request["leaf_key_pem"].encode(), None)
    if variant == "other_key":
        key = ec.generate_private_key(ec.SECP256R1())
    app_id = request["app_id"] if variant != "wrong_app" else "TEAMID.another.app"
    authenticator_data = hashlib.sha256(app_id.encode()).digest() + b"\x00" + struct.pack(">I", request["counter"])
    cdh = client_data_hash(request["challenge_b64"], request["origin"])
    nonce = hashlib.sha256(authenticator_data + cdh).digest()
    signature = key.sign(nonce, ec.ECDSA(hashes.SHA256()))
    obj = {"signature": signature, "authenticatorData": authenticator_data}
    return {"assertion_b64": base64.b64encode(cbor(obj)).decode(), "client_data_hash_b64": base64.b64encode(cdh).decode()}


if __name__ == "__main__":
    request = json.loads(sys.argv[1])
    print(json.dumps({"root": root, "attest": attest, "assert": assertion}[request["op"]](request)))

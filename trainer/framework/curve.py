"""ZeroMQ CURVE keys: an X25519 key pair from a 32-byte seed, and Z85, the text encoding ZeroMQ's
certificates use.

X25519 is ``cryptography``'s (RFC 7748). Z85 (ZeroMQ RFC 32, https://rfc.zeromq.org/spec/32/) is the
standard library's base85 with its alphabet swapped for Z85's, as CPython 3.13's ``base64.z85encode``
is built (the project still runs on 3.11): both read big-endian 4-byte groups as five base-85 digits.
"""

from __future__ import annotations

import base64

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

Z85_ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
"""Z85's 85 digits, in order (ZeroMQ RFC 32)."""
_B85_ALPHABET = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"
_B85_TO_Z85 = bytes.maketrans(_B85_ALPHABET, Z85_ALPHABET)


def z85encode(data: bytes) -> str:
    """``data`` in Z85: five characters per four bytes (a 32-byte key: 40 characters). Raises
    ``ValueError`` when the length is not a multiple of 4 (Z85 has no padding)."""
    if len(data) % 4:
        raise ValueError(f"Z85 encodes a multiple of 4 bytes, not {len(data)}")
    return base64.b85encode(data).translate(_B85_TO_Z85).decode("ascii")


def curve_keypair(seed: bytes) -> tuple[bytes, bytes]:
    """``(public, secret)``, 32 bytes each: the X25519 key pair whose secret key is ``seed`` (32 bytes;
    its bits are clamped when used, not when stored, so ``secret == seed``). Raises ``ValueError`` when
    ``seed`` is not 32 bytes."""
    key = X25519PrivateKey.from_private_bytes(seed)
    return key.public_key().public_bytes_raw(), key.private_bytes_raw()

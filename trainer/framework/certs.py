"""The webhook's certificates, made with the ``cryptography`` library: a long-lived CA and the serving
certificates it signs.

A :class:`Bundle` is what the certificate Secret holds: the PEM bundle of every CA clients should trust
(``ca.crt``, the webhook configurations' caBundle; during a CA hand-over the old and the new CA), the
key of the CA that signs (``ca.key``), and the serving certificate with its key (``tls.crt``,
``tls.key``). The CA lives :data:`CA_VALIDITY` (ten years), a serving certificate :data:`VALIDITY` (one
year) unless told otherwise; both are due for renewal in the last third of their lifetime. When to renew
what is decided in :mod:`trainer.framework.tls`; this module only makes and reads certificates.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import secrets
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)
"""Default lifetime of a serving certificate."""
CA_VALIDITY = datetime.timedelta(days=3650)
"""Lifetime of a CA."""
MAX_BACKDATE = datetime.timedelta(minutes=5)
"""Certificates start this long before they are made (at most a tenth of their lifetime), so that a
client whose clock is a little behind accepts them."""

SECRET_KEYS = ("ca.crt", "tls.crt", "tls.key")
"""The Secret ``data`` keys a bundle needs; ``ca.key`` is optional (absent in older Secrets)."""


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _pem_cert(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _ec_key(pem: str) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key")
    return key


def _now(now: datetime.datetime | None) -> datetime.datetime:
    return now or datetime.datetime.now(datetime.UTC)


def _backdate(validity: datetime.timedelta) -> datetime.timedelta:
    return min(MAX_BACKDATE, validity / 10)


def due(cert: x509.Certificate, now: datetime.datetime | None = None) -> bool:
    """True once ``cert`` is in the last third of its lifetime (or expired, or not yet valid)."""
    now = _now(now)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return now < start or now >= end - (end - start) / 3


def fingerprint(pem: str) -> str:
    """The SHA-256 fingerprint (hex) of the first certificate in ``pem``. Raises ``ValueError``."""
    return x509.load_pem_x509_certificate(pem.encode()).fingerprint(hashes.SHA256()).hex()


@dataclass(frozen=True)
class Bundle:
    """PEM texts: ``ca`` the CAs to trust (one or more certificates), ``cert`` and ``key`` the serving
    certificate and its key, ``ca_key`` the key of the CA in ``ca`` that signs ("" when unknown)."""

    ca: str
    cert: str
    key: str
    ca_key: str = ""

    def to_secret_data(self) -> dict[str, str]:
        """The Secret ``data`` (base64) with keys ``ca.crt``, ``tls.crt``, ``tls.key`` and, when known,
        ``ca.key``."""
        enc = {"ca.crt": self.ca, "tls.crt": self.cert, "tls.key": self.key}
        if self.ca_key:
            enc["ca.key"] = self.ca_key
        return {k: base64.b64encode(v.encode()).decode() for k, v in enc.items()}

    @classmethod
    def from_secret_data(cls, data: dict[str, str]) -> Bundle:
        """The bundle stored in a Secret's ``data``. Raises ``KeyError`` when a key of
        :data:`SECRET_KEYS` is missing, ``ValueError`` when a value is not base64 text."""
        dec = {k: base64.b64decode(data[k], validate=True).decode() for k in SECRET_KEYS}
        ca_key = base64.b64decode(data.get("ca.key") or "", validate=True).decode()
        return cls(ca=dec["ca.crt"], cert=dec["tls.crt"], key=dec["tls.key"], ca_key=ca_key)

    def serving(self) -> x509.Certificate:
        """The serving certificate. Raises ``ValueError`` when it is not a PEM certificate."""
        return x509.load_pem_x509_certificate(self.cert.encode())

    def cas(self) -> list[x509.Certificate]:
        """Every CA certificate of ``ca``, in order. Raises ``ValueError`` when there is none."""
        return x509.load_pem_x509_certificates(self.ca.encode())

    def signing_ca(self) -> x509.Certificate | None:
        """The CA of ``ca`` whose key is ``ca_key``; None without a key or when no CA matches it.
        Raises ``ValueError`` when ``ca`` or ``ca_key`` cannot be read."""
        if not self.ca_key:
            return None
        public = _ec_key(self.ca_key).public_key().public_numbers()
        for ca in self.cas():
            key = ca.public_key()
            if isinstance(key, ec.EllipticCurvePublicKey) and key.public_numbers() == public:
                return ca
        return None

    def issued_by(self, ca: x509.Certificate) -> bool:
        """True when the serving certificate carries a valid signature of ``ca``."""
        try:
            self.serving().verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            return False
        return True

    def not_after(self) -> datetime.datetime:
        """When the serving certificate expires (UTC)."""
        return self.serving().not_valid_after_utc

    def needs_rotation(self, now: datetime.datetime | None = None) -> bool:
        """True within the last third of the serving certificate's lifetime."""
        return due(self.serving(), now)


def new_ca(now: datetime.datetime | None = None, validity: datetime.timedelta = CA_VALIDITY) -> tuple[str, str]:
    """A fresh self-signed CA valid for ``validity`` from ``now``: ``(certificate PEM, key PEM)``.
    Each CA gets a subject of its own, so that an old and a new CA can be trusted side by side."""
    now = _now(now)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, f"trainer-webhook-ca-{now:%Y%m%d%H%M%S}-{secrets.token_hex(4)}")]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _backdate(validity))
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return _pem_cert(cert), _pem_key(key)


def issue(
    ca_cert: str,
    ca_key: str,
    dns_names: list[str],
    ips: list[str],
    now: datetime.datetime | None = None,
    validity: datetime.timedelta = VALIDITY,
) -> tuple[str, str]:
    """A serving certificate for ``dns_names`` and ``ips`` (SANs; at least one of them) signed by the CA
    ``ca_cert``/``ca_key`` (PEM), valid for ``validity`` from ``now`` but never beyond the CA:
    ``(certificate PEM, key PEM)``. Raises ``ValueError`` for an unreadable CA, an empty SAN list or a
    non-positive ``validity``."""
    if not dns_names and not ips:
        raise ValueError("a serving certificate needs a DNS name or an IP address")
    if validity <= datetime.timedelta(0):
        raise ValueError(f"validity must be positive, not {validity}")
    now = _now(now)
    ca = x509.load_pem_x509_certificate(ca_cert.encode())
    signer = _ec_key(ca_key)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0] if dns_names else ips[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(max(now - _backdate(validity), ca.not_valid_before_utc))
        .not_valid_after(min(now + validity, ca.not_valid_after_utc))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False)
        .sign(signer, hashes.SHA256())
    )
    return _pem_cert(cert), _pem_key(key)


def generate(
    dns_names: list[str],
    ips: list[str],
    now: datetime.datetime | None = None,
    validity: datetime.timedelta = VALIDITY,
    ca_validity: datetime.timedelta = CA_VALIDITY,
) -> Bundle:
    """A fresh CA (``ca_validity``) and a serving certificate for ``dns_names`` and ``ips`` (SANs,
    ``validity``) signed by it. Raises ``ValueError`` as :func:`issue`."""
    ca_cert, ca_key = new_ca(now, ca_validity)
    cert, key = issue(ca_cert, ca_key, dns_names, ips, now, validity)
    return Bundle(ca=ca_cert, cert=cert, key=key, ca_key=ca_key)

"""The webhook's TLS: a CA and a serving certificate, made with the ``cryptography`` library.

They live in one Secret (``kubernetes.io/tls`` plus ``ca.crt``) so that every replica of the operator
serves the same certificate and the CA injected into the webhook configurations fits them all. The
first replica to find no Secret (or one within a third of its lifetime of expiring) writes a new
one; the others read it. Certificates are valid for one year.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class Bundle:
    """PEM texts: the CA certificate, the serving certificate and its key."""

    ca: str
    cert: str
    key: str

    def to_secret_data(self) -> dict[str, str]:
        """The Secret ``data`` (base64) with keys ``ca.crt``, ``tls.crt``, ``tls.key``."""
        enc = {"ca.crt": self.ca, "tls.crt": self.cert, "tls.key": self.key}
        return {k: base64.b64encode(v.encode()).decode() for k, v in enc.items()}

    @classmethod
    def from_secret_data(cls, data: dict[str, str]) -> Bundle:
        """The bundle stored in a Secret. Raises ``KeyError``/``ValueError`` when incomplete."""
        dec = {k: base64.b64decode(data[k]).decode() for k in ("ca.crt", "tls.crt", "tls.key")}
        return cls(ca=dec["ca.crt"], cert=dec["tls.crt"], key=dec["tls.key"])

    def not_after(self) -> datetime.datetime:
        """When the serving certificate expires (UTC)."""
        return x509.load_pem_x509_certificate(self.cert.encode()).not_valid_after_utc

    def needs_rotation(self, now: datetime.datetime | None = None) -> bool:
        """True within the last third of the certificate's lifetime."""
        cert = x509.load_pem_x509_certificate(self.cert.encode())
        now = now or datetime.datetime.now(datetime.UTC)
        lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
        return now >= cert.not_valid_after_utc - lifetime / 3


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def generate(dns_names: list[str], ips: list[str], now: datetime.datetime | None = None) -> Bundle:
    """A fresh CA and a serving certificate for ``dns_names`` and ``ips`` (SANs)."""
    now = now or datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "trainer-webhook-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0] if dns_names else ips[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return Bundle(
        ca=ca.public_bytes(serialization.Encoding.PEM).decode(),
        cert=cert.public_bytes(serialization.Encoding.PEM).decode(),
        key=_pem_key(key),
    )

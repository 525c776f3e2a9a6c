"""Certificates and kubeconfigs of the local cluster.

Everything is generated once into ``<state_dir>/pki`` with the ``cryptography`` library and reused
on later starts: a CA, the kube-apiserver serving certificate, one client certificate per user
(all signed by the CA) and the RSA key pair that signs and verifies service-account tokens.

Optional components get their client certificates (:func:`ensure_client_cert`) and serving
certificates (:func:`write_serving_cert`) later, signed by the same CA, so that adding one to a
running cluster never regenerates the CA.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The first address of the service CIDR (10.0.0.0/24): the ClusterIP of "kubernetes.default".
SERVICE_IP = "10.0.0.1"
APISERVER_SANS_DNS = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
POD_GATEWAY = "10.88.0.1"
"""The real nodes' pod network gateway: a host address pods reach, which the apiserver advertises (the
``kubernetes`` Service's endpoint, through kube-proxy) so that in-cluster clients find it."""
APISERVER_SANS_IP = ("127.0.0.1", SERVICE_IP, POD_GATEWAY)
VALIDITY = datetime.timedelta(days=365)

# Client identities, one kubeconfig each: name -> (common name, organization). The controller
# manager runs with --use-service-account-credentials=false, so its controllers act with its own
# identity and need more than the default system:kube-controller-manager role: every component is
# simply a member of system:masters (a throwaway test cluster), with its own common name for audit.
USERS: dict[str, tuple[str, str]] = {
    "admin": ("admin", "system:masters"),
    "kube-controller-manager": ("system:kube-controller-manager", "system:masters"),
    "kube-scheduler": ("system:kube-scheduler", "system:masters"),
    "kwok": ("kwok-controller", "system:masters"),
}


@dataclass(frozen=True)
class Pki:
    """Paths of the generated key material (all PEM)."""

    dir: Path

    @property
    def ca_cert(self) -> Path:
        """The CA certificate: trusted for serving and client certificates alike."""
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        """The CA private key."""
        return self.dir / "ca.key"

    @property
    def apiserver_cert(self) -> Path:
        """The kube-apiserver serving certificate."""
        return self.dir / "apiserver.crt"

    @property
    def apiserver_key(self) -> Path:
        """The kube-apiserver serving key."""
        return self.dir / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        """The RSA private key that signs service-account tokens."""
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        """The RSA public key that verifies service-account tokens."""
        return self.dir / "sa.pub"

    def client_cert(self, user: str) -> Path:
        """The client certificate of ``user`` (a key of :data:`USERS`)."""
        return self.dir / f"{user}.crt"

    def client_key(self, user: str) -> Path:
        """The client key of ``user`` (a key of :data:`USERS`)."""
        return self.dir / f"{user}.key"


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


def _leaf(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    sans: list[x509.GeneralName] | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    builder = (
        _builder(subject, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        # The authority key identifier is required by strict X.509 checks (Python >= 3.13's ssl).
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def ensure_pki(directory: Path) -> Pki:
    """Generate the cluster's key material into ``directory`` unless it is already there."""
    pki = Pki(directory)
    done = [pki.ca_cert, pki.apiserver_cert, pki.sa_pub, *(pki.client_cert(u) for u in USERS)]
    if all(path.exists() for path in done):
        if not _has_ip_sans(pki.apiserver_cert, APISERVER_SANS_IP):  # made before a SAN was added
            _write_apiserver_cert(pki, *_load_ca(pki))
        return pki
    directory.mkdir(parents=True, exist_ok=True)

    ca_key = _new_key()
    ca_name = _name("trainer-local-ca")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(pki.ca_key, ca_key)
    _write_cert(pki.ca_cert, ca_cert)

    _write_apiserver_cert(pki, ca_cert, ca_key)

    for user, (common_name, organization) in USERS.items():
        cert, key = _leaf(ca_cert, ca_key, _name(common_name, organization), ExtendedKeyUsageOID.CLIENT_AUTH)
        _write_key(pki.client_key(user), key)
        _write_cert(pki.client_cert(user), cert)

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return pki


def _write_apiserver_cert(pki: Pki, ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey) -> None:
    sans: list[x509.GeneralName] = [x509.DNSName(name) for name in APISERVER_SANS_DNS]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in APISERVER_SANS_IP]
    cert, key = _leaf(ca_cert, ca_key, _name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, sans)
    _write_key(pki.apiserver_key, key)
    _write_cert(pki.apiserver_cert, cert)


def _has_ip_sans(cert_path: Path, ips: tuple[str, ...]) -> bool:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    try:
        have = set(
            cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
                x509.IPAddress
            )
        )
    except x509.ExtensionNotFound:
        return False
    return {ipaddress.ip_address(ip) for ip in ips} <= have


def _load_ca(pki: Pki) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.ca_key} is not an EC private key")
    return ca_cert, ca_key


def _signed_by(cert_path: Path, ca_cert: x509.Certificate) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    except (OSError, ValueError):
        return False
    return cert.issuer == ca_cert.subject and cert.not_valid_after_utc > datetime.datetime.now(datetime.UTC)


def _replace(path: Path, data: bytes, mode: int) -> None:
    """Write ``path`` atomically (a reader never sees half a file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.chmod(mode)
    os.replace(tmp, path)


def ensure_client_cert(pki: Pki, user: str, common_name: str, organization: str) -> None:
    """Give ``user`` a client certificate signed by the cluster CA, unless it has a valid one.

    For the identities of optional components (not in :data:`USERS`): ``pki.client_cert(user)``
    and ``pki.client_key(user)`` then exist, for :func:`write_kubeconfig`.
    """
    ca_cert, ca_key = _load_ca(pki)
    if _signed_by(pki.client_cert(user), ca_cert) and pki.client_key(user).exists():
        return
    cert, key = _leaf(ca_cert, ca_key, _name(common_name, organization), ExtendedKeyUsageOID.CLIENT_AUTH)
    _write_key(pki.client_key(user), key)
    _write_cert(pki.client_cert(user), cert)


def write_serving_cert(
    pki: Pki,
    directory: Path,
    common_name: str,
    dns_names: Sequence[str] = ("localhost",),
    ip_addresses: Sequence[str] = ("127.0.0.1",),
) -> None:
    """Write a CA-signed serving certificate as ``tls.crt``/``tls.key`` (and ``ca.crt``) in ``directory``.

    The layout a controller-runtime webhook or metrics server reads from its cert dir. Each file
    is replaced atomically; a new key pair is generated on every call.
    """
    ca_cert, ca_key = _load_ca(pki)
    sans: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    cert, key = _leaf(ca_cert, ca_key, _name(common_name), ExtendedKeyUsageOID.SERVER_AUTH, sans)
    directory.mkdir(parents=True, exist_ok=True)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _replace(directory / "ca.crt", ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    _replace(directory / "tls.key", key_pem, 0o600)
    _replace(directory / "tls.crt", cert.public_bytes(serialization.Encoding.PEM), 0o644)


def write_kubeconfig(path: Path, pki: Pki, user: str, server: str, context: str = "trainer-local") -> Path:
    """Write a kubeconfig for ``user`` that points at ``server`` and references the PKI files."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": context, "cluster": {"server": server, "certificate-authority": str(pki.ca_cert)}},
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(pki.client_cert(user)),
                    "client-key": str(pki.client_key(user)),
                },
            },
        ],
        "contexts": [{"name": context, "context": {"cluster": context, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path

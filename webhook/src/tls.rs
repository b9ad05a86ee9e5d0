//! The webhook's serving certificate: read from PEM files (`--tls-cert-file`,
//! `--tls-private-key-file`, `--ca-cert-file`, as Volcano's webhook-manager takes them), or
//! generated: a self-signed CA and a certificate signed by it for the names the API server
//! calls (`<service>.<namespace>.svc` and its shorter forms, or the host of `--webhook-url`).

use std::path::Path;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A serving certificate and key, and the CA bundle the API server trusts it with (PEM).
#[derive(Clone, PartialEq, Eq)]
pub struct Certificates {
    /// The serving certificate (chain), PEM.
    pub cert_pem: String,
    /// Its private key, PEM.
    pub key_pem: String,
    /// The CA certificate, PEM (the webhook configurations' `caBundle`).
    pub ca_pem: String,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is never printed.
        f.debug_struct("Certificates").field("cert_pem", &self.cert_pem).field("ca_pem", &self.ca_pem).finish()
    }
}

/// A certificate problem.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// PEM that is not what was expected.
    #[error("{what}: {message}")]
    Pem {
        /// What was being read.
        what: String,
        /// Why it failed.
        message: String,
    },
    /// Generating a certificate failed.
    #[error("cannot generate the certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the certificate and key.
    #[error("the certificate and key do not make a TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

impl TlsError {
    /// A bounded label, saying what the user fixes: a file that cannot be read (`read`), a
    /// file's contents (`pem`, `config`), or nothing (`generate`: a bug or the system).
    pub fn category(&self) -> &'static str {
        match self {
            TlsError::Read { .. } => "read",
            TlsError::Pem { .. } => "pem",
            TlsError::Generate(_) => "generate",
            TlsError::Config(_) => "config",
        }
    }
}

impl Certificates {
    /// Reads the certificate, key and CA files.
    pub fn from_files(cert: &Path, key: &Path, ca: &Path) -> Result<Self, TlsError> {
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|source| TlsError::Read { path: p.display().to_string(), source })
        };
        let c = Certificates { cert_pem: read(cert)?, key_pem: read(key)?, ca_pem: read(ca)? };
        c.server_config()?;
        Ok(c)
    }

    /// A new CA, valid for ten years, and a serving certificate signed by it for `names` (DNS
    /// names, or IP addresses written as such).
    pub fn generate(names: &[String]) -> Result<Self, TlsError> {
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name.push(DnType::CommonName, "volcano-rs webhook CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        ca.not_before = rcgen::date_time_ymd(2024, 1, 1);
        ca.not_after = rcgen::date_time_ymd(2124, 1, 1);
        let ca_cert = ca.self_signed(&ca_key)?;

        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, names.first().cloned().unwrap_or_default());
        params.subject_alt_names = names
            .iter()
            .map(|n| match n.parse::<std::net::IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => n.clone().try_into().map(SanType::DnsName),
            })
            .collect::<Result<_, _>>()?;
        params.not_before = rcgen::date_time_ymd(2024, 1, 1);
        params.not_after = rcgen::date_time_ymd(2124, 1, 1);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &ca_cert, &ca_key)?;
        Ok(Certificates { cert_pem: cert.pem(), key_pem: key.serialize_pem(), ca_pem: ca_cert.pem() })
    }

    /// The rustls configuration that serves this certificate (HTTP/1.1).
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| TlsError::Pem { what: "the serving certificate".into(), message: e.to_string() })?;
        if certs.is_empty() {
            return Err(TlsError::Pem {
                what: "the serving certificate".into(),
                message: "no CERTIFICATE block".into(),
            });
        }
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| TlsError::Pem { what: "the private key".into(), message: e.to_string() })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The names a webhook behind Service `service` in `namespace` is called by.
pub fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
        format!("{service}.{namespace}"),
        service.to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_certificate_makes_a_server_config_and_hides_its_key() {
        let c = Certificates::generate(&service_names("volcano-rs-webhook", "volcano-system")).unwrap();
        assert!(c.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(c.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_ne!(c.cert_pem, c.ca_pem);
        c.server_config().unwrap();
        assert!(!format!("{c:?}").contains("PRIVATE KEY"));
        let ip = Certificates::generate(&["127.0.0.1".to_string()]).unwrap();
        ip.server_config().unwrap();
    }

    #[test]
    fn a_key_that_is_not_pem_is_an_error_naming_it() {
        let mut c = Certificates::generate(&["x".to_string()]).unwrap();
        c.key_pem = "not a key".into();
        let e = c.server_config().unwrap_err().to_string();
        assert!(e.contains("private key"), "{e}");
    }
}

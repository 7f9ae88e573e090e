//! Reaching an allowed destination: a name is resolved once, every address it resolves to
//! must be public (`amber_policy::net::non_public`), and the connection goes only to those
//! addresses — the check and the connect use the same lookup, so a name cannot pass with
//! one answer and connect with another (DNS rebinding). An IP literal is judged as it is; a
//! private one is reached only when the allowlist names that very address.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use amber_policy::net::non_public;
use tokio::net::TcpStream;

use super::protocol::Host;

/// Connecting to one destination may take this long, every address tried included.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a destination was not reached.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DialError {
    /// It is an address that is not public: a refusal of the policy.
    #[error("{ip} is a {kind} address, which the egress proxy does not reach")]
    PrivateAddress { ip: IpAddr, kind: &'static str },
    /// It resolves to an address that is not public: a refusal of the policy.
    #[error(
        "{host} resolves to {ip}, a {kind} address, which the egress proxy does not reach \
         (whatever the name: no rebinding)"
    )]
    ResolvesPrivate {
        host: String,
        ip: IpAddr,
        kind: &'static str,
    },
    #[error("{host} does not resolve: {source}")]
    Resolve {
        host: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{host} resolves to no address")]
    NoAddress { host: String },
    #[error("cannot connect to {host}:{port}: {source}")]
    Connect {
        host: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("connecting to {host}:{port} timed out")]
    TimedOut { host: String, port: u16 },
}

impl DialError {
    /// Whether the policy refused it (rather than the network failing).
    pub(crate) fn refused(&self) -> bool {
        matches!(
            self,
            DialError::PrivateAddress { .. } | DialError::ResolvesPrivate { .. }
        )
    }
}

/// The addresses `host` may be reached at: an IP literal as it is, a name by all it resolves
/// to, each of them public or one of `private` (addresses the allowlist names one by one).
pub(crate) async fn addresses(
    host: &Host,
    port: u16,
    private: &[IpAddr],
) -> Result<Vec<SocketAddr>, DialError> {
    let refused = |ip: IpAddr| non_public(ip).filter(|_| !private.contains(&ip));
    match host {
        Host::Ip(ip) => {
            if let Some(kind) = refused(*ip) {
                return Err(DialError::PrivateAddress { ip: *ip, kind });
            }
            Ok(vec![SocketAddr::new(*ip, port)])
        }
        Host::Name(name) => {
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), port))
                .await
                .map_err(|source| DialError::Resolve {
                    host: name.clone(),
                    source,
                })?
                .collect();
            // One private answer refuses the name: a mixed answer is how rebinding starts.
            if let Some((ip, kind)) = resolved
                .iter()
                .find_map(|addr| refused(addr.ip()).map(|kind| (addr.ip(), kind)))
            {
                return Err(DialError::ResolvesPrivate {
                    host: name.clone(),
                    ip,
                    kind,
                });
            }
            if resolved.is_empty() {
                return Err(DialError::NoAddress { host: name.clone() });
            }
            Ok(resolved)
        }
    }
}

/// Connects to the first of `addrs` that answers.
pub(crate) async fn connect(
    host: &str,
    port: u16,
    addrs: &[SocketAddr],
) -> Result<TcpStream, DialError> {
    let attempt = async {
        let mut last = None;
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(stream) => {
                    // Interactive protocols (git's, a registry's small requests) should not
                    // wait on Nagle behind the proxy.
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Err(err) => last = Some(err),
            }
        }
        Err(DialError::Connect {
            host: host.to_owned(),
            port,
            source: last.unwrap_or_else(|| std::io::Error::other("no address to try")),
        })
    };
    tokio::time::timeout(CONNECT_TIMEOUT, attempt)
        .await
        .unwrap_or_else(|_| {
            Err(DialError::TimedOut {
                host: host.to_owned(),
                port,
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn private_literals_are_refused_unless_named() {
        for ip in [
            "127.0.0.1",
            "10.0.0.1",
            "169.254.169.254",
            "::1",
            "::ffff:127.0.0.1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            let err = addresses(&Host::Ip(ip), 80, &[]).await.unwrap_err();
            assert!(err.refused(), "{ip}: {err}");
            assert_eq!(
                addresses(&Host::Ip(ip), 80, &[ip]).await.unwrap(),
                vec![SocketAddr::new(ip, 80)]
            );
        }
    }

    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused_unless_each_address_is_named() {
        // `localhost` resolves through the hosts file on every machine (to 127.0.0.1, and
        // often ::1 too).
        let v4: IpAddr = "127.0.0.1".parse().unwrap();
        let err = addresses(&Host::Name("localhost".into()), 80, &[])
            .await
            .unwrap_err();
        assert!(err.refused(), "{err}");
        assert!(err.to_string().contains("loopback"), "{err}");
        let other: IpAddr = "10.9.9.9".parse().unwrap();
        assert!(
            addresses(&Host::Name("localhost".into()), 80, &[other])
                .await
                .unwrap_err()
                .refused()
        );
        let named = [v4, "::1".parse().unwrap()];
        let reached = addresses(&Host::Name("localhost".into()), 80, &named)
            .await
            .unwrap();
        assert!(reached.contains(&SocketAddr::new(v4, 80)), "{reached:?}");
    }

    #[tokio::test]
    async fn a_public_literal_is_reached_as_it_is() {
        let ip: IpAddr = "1.1.1.1".parse().unwrap();
        assert_eq!(
            addresses(&Host::Ip(ip), 443, &[]).await.unwrap(),
            vec![SocketAddr::new(ip, 443)]
        );
    }
}

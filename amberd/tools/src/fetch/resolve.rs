//! Name resolution that checks what it hands out. **`fetch` connects only to addresses this
//! resolver returned, and it returns a name's addresses only when every one is public** (or
//! private addresses are allowed), so a name cannot pass the check with one answer and
//! connect with another (DNS rebinding): the check and the connect use the same lookup.
//! reqwest skips the resolver for IP literals; `check_literal` judges those before a request.

use std::net::{IpAddr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use amber_policy::net::non_public;

/// A request's host is, or resolves to, an address `fetch` refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefusedAddress {
    pub(crate) host: String,
    /// The address a name resolved to (`None`: the host is that address).
    pub(crate) resolved: Option<IpAddr>,
    pub(crate) kind: &'static str,
}

impl std::fmt::Display for RefusedAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            host,
            resolved,
            kind,
        } = self;
        match resolved {
            Some(ip) => write!(f, "{host} resolves to {ip}, a {kind} address")?,
            None => write!(f, "{host} is a {kind} address")?,
        }
        f.write_str(
            "; fetch reaches public addresses only (`[tools] fetch_allow_private = true` \
             lifts this)",
        )
    }
}

impl std::error::Error for RefusedAddress {}

/// The lookup `fetch`'s client uses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CheckedResolver {
    pub(crate) allow_private: bool,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            // Port 0: the connector sets the URL's port on every address.
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !allow_private {
                check_all(&host, &addrs)?;
            }
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// Every address must be public: one private answer refuses the name.
fn check_all(host: &str, addrs: &[SocketAddr]) -> Result<(), RefusedAddress> {
    match addrs
        .iter()
        .find_map(|a| non_public(a.ip()).map(|kind| (a.ip(), kind)))
    {
        Some((ip, kind)) => Err(RefusedAddress {
            host: host.to_owned(),
            resolved: Some(ip),
            kind,
        }),
        None => Ok(()),
    }
}

/// A URL host that is an IP literal (`url_host`'s form: no brackets), judged directly.
pub(crate) fn check_literal(host: &str, allow_private: bool) -> Result<(), RefusedAddress> {
    let Ok(ip) = host.parse::<IpAddr>() else {
        return Ok(());
    };
    match non_public(ip).filter(|_| !allow_private) {
        Some(kind) => Err(RefusedAddress {
            host: host.to_owned(),
            resolved: None,
            kind,
        }),
        None => Ok(()),
    }
}

/// The refusal inside a transport error, if the resolver refused.
pub(crate) fn refusal_in(err: &(dyn std::error::Error + 'static)) -> Option<RefusedAddress> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(refused) = e.downcast_ref::<RefusedAddress>() {
            return Some(refused.clone());
        }
        next = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_judged_without_a_lookup() {
        let err = check_literal("127.0.0.1", false).unwrap_err();
        assert_eq!(err.kind, "loopback");
        assert!(err.to_string().contains("fetch_allow_private"), "{err}");
        assert!(check_literal("::ffff:10.0.0.1", false).is_err());
        assert!(check_literal("127.0.0.1", true).is_ok());
        assert!(check_literal("8.8.8.8", false).is_ok());
        assert!(check_literal("docs.rs", false).is_ok());
    }

    #[test]
    fn one_private_answer_refuses_the_name() {
        let addrs: Vec<SocketAddr> = ["93.184.216.34:0", "10.0.0.7:0"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let err = check_all("mixed.example", &addrs).unwrap_err();
        assert_eq!(err.resolved, Some("10.0.0.7".parse().unwrap()));
        assert!(
            err.to_string()
                .starts_with("mixed.example resolves to 10.0.0.7, a private")
        );
        assert!(check_all("public.example", &addrs[..1]).is_ok());
    }

    #[tokio::test]
    async fn the_resolver_refuses_a_name_that_resolves_to_loopback() {
        let name = || "localhost".parse::<Name>().unwrap();
        let refused = CheckedResolver {
            allow_private: false,
        }
        .resolve(name())
        .await;
        let err = refused.err().unwrap();
        let refusal = refusal_in(err.as_ref()).unwrap();
        assert_eq!(refusal.kind, "loopback");
        let allowed = CheckedResolver {
            allow_private: true,
        }
        .resolve(name())
        .await
        .unwrap();
        assert!(allowed.into_iter().all(|a| a.ip().is_loopback()));
    }
}

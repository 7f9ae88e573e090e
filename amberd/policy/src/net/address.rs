//! Which addresses are not the public internet: every range that reaches this machine or
//! its networks (loopback, private, link-local, CGNAT, unique-local, multicast,
//! unspecified, reserved), also when an IPv6 address embeds such an IPv4 one (mapped,
//! compatible, NAT64, 6to4). `fetch` refuses them (unless `[tools] fetch_allow_private`),
//! after DNS resolution as well as for literals; the one place these rules live.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `ip` is not a public address, or `None` when it is.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, _, _) => "unspecified (0.0.0.0/8)",
        (127, _, _) => "loopback",
        (10, _, _) | (192, 168, _) => "private",
        (172, 16..=31, _) => "private",
        (169, 254, _) => "link-local",
        (100, 64..=127, _) => "carrier-grade NAT (100.64.0.0/10)",
        (192, 0, 0) => "IETF protocol assignments (192.0.0.0/24)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (198, 18..=19, _) => "benchmarking (198.18.0.0/15)",
        (224..=239, _, _) => "multicast",
        (240..=255, _, _) => "reserved or broadcast",
        _ => return None,
    })
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    let segments = ip.segments();
    // Forms that carry an IPv4 address: judged by that address.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return non_public_v4(v4);
    }
    match segments {
        // IPv4-compatible (deprecated), `::a.b.c.d`.
        [0, 0, 0, 0, 0, 0, _, _] => return non_public_v4(low_v4(&segments)),
        // NAT64 well-known prefix, 64:ff9b::/96.
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => return non_public_v4(low_v4(&segments)),
        // 6to4, 2002:a.b.c.d::/48.
        [0x2002, hi, lo, ..] => {
            let [a, b] = hi.to_be_bytes();
            let [c, d] = lo.to_be_bytes();
            return non_public_v4(Ipv4Addr::new(a, b, c, d));
        }
        _ => {}
    }
    let first = segments[0];
    Some(match first {
        _ if first & 0xfe00 == 0xfc00 => "unique-local (fc00::/7)",
        _ if first & 0xffc0 == 0xfe80 => "link-local",
        _ if first & 0xffc0 == 0xfec0 => "site-local (fec0::/10)",
        _ if first & 0xff00 == 0xff00 => "multicast",
        0x2001 if segments[1] == 0x0db8 => "documentation",
        _ => return None,
    })
}

/// The IPv4 address in the low 32 bits.
fn low_v4(segments: &[u16; 8]) -> Ipv4Addr {
    let [a, b] = segments[6].to_be_bytes();
    let [c, d] = segments[7].to_be_bytes();
    Ipv4Addr::new(a, b, c, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(ip: &str) -> Option<&'static str> {
        non_public(ip.parse().unwrap())
    }

    #[test]
    fn private_and_special_ipv4_ranges_are_refused() {
        for (ip, kind) in [
            ("127.0.0.1", "loopback"),
            ("127.255.1.2", "loopback"),
            ("0.0.0.0", "unspecified"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("100.64.0.1", "carrier-grade"),
            ("100.127.255.255", "carrier-grade"),
            ("224.0.0.251", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("198.18.0.1", "benchmarking"),
        ] {
            let got = why(ip);
            assert!(got.is_some_and(|g| g.contains(kind)), "{ip}: {got:?}");
        }
    }

    #[test]
    fn public_ipv4_addresses_pass_even_next_to_private_ranges() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "169.253.1.1",
            "11.0.0.1",
            "223.255.255.255",
        ] {
            assert_eq!(why(ip), None, "{ip}");
        }
    }

    #[test]
    fn ipv6_special_ranges_and_embedded_ipv4_are_refused() {
        for (ip, kind) in [
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fe80::1", "link-local"),
            ("fc00::1", "unique-local"),
            ("fd12:3456::1", "unique-local"),
            ("ff02::1", "multicast"),
            ("fec0::1", "site-local"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::127.0.0.1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("2002:7f00:1::", "loopback"),
            ("2001:db8::1", "documentation"),
        ] {
            let got = why(ip);
            assert!(got.is_some_and(|g| g.contains(kind)), "{ip}: {got:?}");
        }
    }

    #[test]
    fn public_ipv6_addresses_pass() {
        for ip in [
            "2606:4700:4700::1111",
            "2a00:1450:4001::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert_eq!(why(ip), None, "{ip}");
        }
    }
}

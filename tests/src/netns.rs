//! A network namespace of the test's own, joined to the host by a veth pair on a private /30:
//! "another machine" whose link the test can cut and restore. Deleted on drop.

use std::process::Command;

/// The namespace and its link.
pub struct NetNs {
    pub name: String,
    /// The host's end of the veth pair.
    pub host_link: String,
    /// The host's address on the link.
    pub host_addr: String,
    /// The namespace's address on the link: what the host reaches it at.
    pub addr: String,
}

impl NetNs {
    /// Makes the namespace and its link (needs root and `ip`).
    pub fn new() -> NetNs {
        NetNs::numbered(0)
    }

    /// The `index`th (0..4) namespace of this test process: several "machines".
    pub fn numbered(index: u32) -> NetNs {
        assert!(index < 4, "at most four namespaces per test process");
        let tag = (std::process::id() % 15_000) * 4 + index;
        let name = format!("amber-t{tag}");
        let host_link = format!("amh{tag}");
        let ns_link = format!("amn{tag}");
        // 10.231.0.0/16 in /30s, one per namespace.
        let block = (tag % 16_000) * 4;
        let (hi, lo) = (block / 256, block % 256);
        let host_addr = format!("10.231.{hi}.{}", lo + 1);
        let addr = format!("10.231.{hi}.{}", lo + 2);
        let _ = ip(&["netns", "del", &name]);
        let _ = ip(&["link", "del", &host_link]);
        ip(&["netns", "add", &name]).expect("ip netns add");
        ip(&[
            "link", "add", &host_link, "type", "veth", "peer", "name", &ns_link,
        ])
        .expect("ip link add veth");
        ip(&["link", "set", &ns_link, "netns", &name]).expect("move the veth end");
        ip(&["addr", "add", &format!("{host_addr}/30"), "dev", &host_link]).expect("host addr");
        ip(&["link", "set", &host_link, "up"]).expect("host link up");
        let inside = |args: &[&str]| {
            let mut all = vec!["netns", "exec", name.as_str(), "ip"];
            all.extend_from_slice(args);
            ip(&all)
        };
        inside(&["addr", "add", &format!("{addr}/30"), "dev", &ns_link]).expect("ns addr");
        inside(&["link", "set", &ns_link, "up"]).expect("ns link up");
        inside(&["link", "set", "lo", "up"]).expect("ns loopback up");
        NetNs {
            name,
            host_link,
            host_addr,
            addr,
        }
    }

    /// Cuts the link: nothing passes until [`NetNs::restore`].
    pub fn cut(&self) {
        ip(&["link", "set", &self.host_link, "down"]).expect("link down");
    }

    pub fn restore(&self) {
        ip(&["link", "set", &self.host_link, "up"]).expect("link up");
    }

    /// `ip netns exec NAME` before a program: it runs on this "machine".
    pub fn exec_prefix(&self) -> Vec<String> {
        vec!["netns".to_owned(), "exec".to_owned(), self.name.clone()]
    }
}

impl Default for NetNs {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
        let _ = ip(&["link", "del", &self.host_link]);
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

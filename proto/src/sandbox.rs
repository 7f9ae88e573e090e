//! The OS sandbox as the protocol names it (second wave, issue "sandbox"): the mode a
//! session's commands run in, what `session/new {sandbox}` asks for, what
//! `session/get` / `SessionInfo` / `daemon/status` report, and the result of amber's
//! `sandbox/selftest`.

use serde::{Deserialize, Serialize};

/// What a sandboxed command may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read everything; write only the workspace, the session's temp dir and the
    /// configured writable roots (protected paths inside the workspace stay read-only).
    #[default]
    WorkspaceWrite,
    /// Read everything; write only the session's temp dir and `/dev/null`.
    ReadOnly,
    /// No OS sandbox: commands run with the daemon's own access.
    Off,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::Off => "off",
        }
    }
}

impl std::str::FromStr for SandboxMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "read-only" => Ok(SandboxMode::ReadOnly),
            "off" => Ok(SandboxMode::Off),
            other => Err(format!(
                "unknown sandbox mode `{other}` (expected workspace-write, read-only or off)"
            )),
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a sandboxed command may reach: nothing (`off`), the hosts the network allowlist
/// lets through amber's egress proxy (`allowlist`), or everything (`on`). Read from a
/// string, or from the boolean the setting was before (`false` is `off`, `true` is `on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    #[default]
    Off,
    Allowlist,
    On,
}

impl NetworkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Off => "off",
            NetworkMode::Allowlist => "allowlist",
            NetworkMode::On => "on",
        }
    }

    /// `true` is `on`, `false` is `off`.
    pub fn from_bool(on: bool) -> Self {
        if on {
            NetworkMode::On
        } else {
            NetworkMode::Off
        }
    }
}

impl std::str::FromStr for NetworkMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" | "false" => Ok(NetworkMode::Off),
            "allowlist" => Ok(NetworkMode::Allowlist),
            "on" | "true" => Ok(NetworkMode::On),
            other => Err(format!(
                "unknown network setting `{other}` (expected off, allowlist or on)"
            )),
        }
    }
}

impl std::fmt::Display for NetworkMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for NetworkMode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Spelling {
            Bool(bool),
            Text(String),
        }
        match Spelling::deserialize(deserializer)? {
            Spelling::Bool(on) => Ok(NetworkMode::from_bool(on)),
            Spelling::Text(text) => text.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// A session's effective sandbox (`SessionInfo.sandbox`). `network` is `true` only when
/// the network is wholly on (what clients that know no allowlist read); `networkMode` says
/// which of the three it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "SandboxInfoWire")]
pub struct SandboxInfo {
    pub mode: SandboxMode,
    pub network: bool,
    pub network_mode: NetworkMode,
}

impl SandboxInfo {
    pub fn new(mode: SandboxMode, network: NetworkMode) -> Self {
        Self {
            mode,
            network: network == NetworkMode::On,
            network_mode: network,
        }
    }
}

/// [`SandboxInfo`] as sent; one without `networkMode` (from before the allowlist) has the
/// mode its `network` says.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SandboxInfoWire {
    mode: SandboxMode,
    network: bool,
    #[serde(default)]
    network_mode: Option<NetworkMode>,
}

impl From<SandboxInfoWire> for SandboxInfo {
    fn from(wire: SandboxInfoWire) -> Self {
        SandboxInfo::new(
            wire.mode,
            wire.network_mode
                .unwrap_or(NetworkMode::from_bool(wire.network)),
        )
    }
}

/// `session/new {sandbox}`: what the session asks for; unset fields take the daemon's
/// `[sandbox]` configuration. `network` takes `"off"`, `"allowlist"`, `"on"` or a boolean;
/// `allowDomains` and `denyDomains` add to the configured lists (they never remove from
/// them: a session cannot lift the configuration's denials).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<SandboxMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkMode>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_domains: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_domains: Vec<String>,
}

/// `daemon/status.sandbox`: what the kernel offers and whether the daemon's start-up probe
/// could run a command in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxStatus {
    /// `true`: a probe command ran sandboxed; `false`: it could not (see `reason`); `null`
    /// while the probe still runs (it starts with the daemon and takes milliseconds).
    pub available: Option<bool>,
    /// Why the sandbox is unavailable (the sandbox setup's own message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The kernel's Landlock ABI version; absent without Landlock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landlock_abi: Option<u32>,
    /// How much of amber's Landlock rules this kernel's ABI enforces: `full`, or `partial`
    /// (see `landlock_missing`); absent without Landlock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landlock_enforcement: Option<LandlockEnforcement>,
    /// The Landlock features the sandbox would use that this kernel's ABI lacks, and what
    /// holds instead; empty (absent) when every one is enforced or there is no Landlock.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub landlock_missing: Vec<LandlockGap>,
    /// seccomp filters can be installed.
    pub seccomp: bool,
    /// Unprivileged user, mount and network namespaces can be created: `true` once the probe
    /// ran sandboxed, `false` when the kernel forbids them; absent when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<bool>,
    /// The sandbox sessions get unless they ask for another (`[sandbox] mode`).
    pub default_mode: SandboxMode,
    /// Whether sessions get the whole network by default (`[sandbox] network = "on"`).
    pub network: bool,
    /// The network sessions get by default (`[sandbox] network`).
    #[serde(default)]
    pub network_mode: NetworkMode,
    /// Why sessions whose network is an allowlist get no network here (the kernel cannot
    /// give their commands a network namespace of their own); absent when they can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowlist_unavailable: Option<String>,
}

/// How much of amber's Landlock rules the kernel's ABI enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LandlockEnforcement {
    /// Every Landlock feature the sandbox uses.
    Full,
    /// Some are missing (an older ABI): the other layers hold for them, as far as they reach.
    Partial,
}

impl LandlockEnforcement {
    pub fn as_str(self) -> &'static str {
        match self {
            LandlockEnforcement::Full => "full",
            LandlockEnforcement::Partial => "partial",
        }
    }
}

/// One Landlock feature the sandbox would use that the kernel's ABI lacks.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LandlockGap {
    /// A stable name: `refer`, `truncate`, `net_tcp`, `ioctl_dev`, `scope_abstract_unix_socket`,
    /// `scope_signal`.
    pub feature: String,
    /// The Landlock ABI that brings it.
    pub abi: u32,
    /// What holds without it, in a line.
    pub fallback: String,
}

/// `sandbox/selftest`'s result: `ok` when every check passed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSelftestResult {
    pub ok: bool,
    pub checks: Vec<SelftestCheck>,
}

/// One check of `sandbox/selftest`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelftestCheck {
    /// A stable name (`write_outside_workspace`, `loopback_connect`, `write_inside_workspace`).
    pub name: String,
    pub ok: bool,
    /// What happened, in a line.
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_network_setting_reads_words_and_the_booleans_it_was() {
        for (given, want) in [
            (json!("off"), NetworkMode::Off),
            (json!("allowlist"), NetworkMode::Allowlist),
            (json!("on"), NetworkMode::On),
            (json!(false), NetworkMode::Off),
            (json!(true), NetworkMode::On),
        ] {
            let read: NetworkMode = serde_json::from_value(given.clone()).unwrap();
            assert_eq!(read, want, "{given}");
        }
        let err = serde_json::from_value::<NetworkMode>(json!("some")).unwrap_err();
        assert!(err.to_string().contains("off, allowlist or on"), "{err}");
        assert_eq!(
            serde_json::to_value(NetworkMode::Allowlist).unwrap(),
            json!("allowlist")
        );
    }

    #[test]
    fn a_sandbox_info_without_a_network_mode_has_the_one_its_boolean_says() {
        let old: SandboxInfo =
            serde_json::from_value(json!({"mode": "read-only", "network": true})).unwrap();
        assert_eq!(
            old,
            SandboxInfo::new(SandboxMode::ReadOnly, NetworkMode::On)
        );
        let allowlist = SandboxInfo::new(SandboxMode::WorkspaceWrite, NetworkMode::Allowlist);
        assert_eq!(
            serde_json::to_value(allowlist).unwrap(),
            json!({"mode": "workspace-write", "network": false, "networkMode": "allowlist"}),
            "clients that know no allowlist read `network: false`"
        );
    }
}

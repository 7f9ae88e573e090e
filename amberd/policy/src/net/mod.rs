//! Network policy, pure: [`non_public`] says which addresses are not the public internet
//! (`address.rs`: what `fetch` refuses after resolution, and literals), and [`DomainRules`]
//! which hosts an allowlist lets through (`domains.rs`: patterns, presets, deny wins).

mod address;
mod domains;

pub use address::non_public;
pub use domains::{DomainRules, HostPattern, HostVerdict, NamedPattern, PRESETS, PatternError};

//! The contribution registries (tools, providers, commands, status segments, panels) and
//! the capability ledger that says who contributed what.
//!
//! **Invariants:** a name is unique within its kind; every entry has exactly one owner and
//! appears in that owner's ledger row; `install` registers all of a contribution set or
//! none of it; `unwind` removes exactly what the owner's ledger row lists; `replace` swaps an
//! owner's set under one write lock, so readers see the old set or the new one. The agent, the
//! clients and the protocol see contributions only through these registries.

use amber_proto::sync::RwLocked;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use amber_llm::ProviderSpec;
use amber_proto::Capability;

use super::contrib::{CapabilityKind, Command, Contributions, Panel, StatusSegment};
use amber_tools::{Tool, ToolRegistry};

/// Who contributed an entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    /// A bundled or external plugin, by name.
    Plugin(String),
    /// An MCP server, by name.
    Mcp(String),
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Plugin(name) => write!(f, "plugin `{name}`"),
            Owner::Mcp(name) => write!(f, "MCP server `{name}`"),
        }
    }
}

/// A name already taken by another owner.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} `{name}` is already registered by {owner}")]
pub struct Conflict {
    pub kind: &'static str,
    pub name: String,
    pub owner: String,
}

struct Entry<T> {
    owner: Owner,
    item: T,
}

/// A registered tool with the `source` that `tool/list` reports.
#[derive(Clone)]
pub struct ToolEntry {
    pub tool: Arc<dyn Tool>,
    /// `builtin`, `plugin:NAME` or `mcp:SERVER`.
    pub source: String,
}

#[derive(Default)]
struct Inner {
    tools: Vec<Entry<ToolEntry>>,
    providers: Vec<Entry<ProviderSpec>>,
    commands: Vec<Entry<Arc<dyn Command>>>,
    status: Vec<Entry<Arc<dyn StatusSegment>>>,
    panels: Vec<Entry<Arc<dyn Panel>>>,
    ledger: BTreeMap<Owner, Vec<(CapabilityKind, String)>>,
}

impl Inner {
    /// The ledger row of one owner, as capabilities.
    fn capabilities(&self, owner: &Owner) -> Vec<Capability> {
        self.ledger
            .get(owner)
            .map(|row| {
                row.iter()
                    .map(|(kind, name)| kind.capability(name))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn owner_of(&self, kind: CapabilityKind, name: &str) -> Option<&Owner> {
        fn find<'a, T>(
            entries: &'a [Entry<T>],
            name: &str,
            key: impl Fn(&T) -> &str,
        ) -> Option<&'a Owner> {
            entries
                .iter()
                .find(|e| key(&e.item) == name)
                .map(|e| &e.owner)
        }
        match kind {
            CapabilityKind::Tool => find(&self.tools, name, |t| t.tool.name()),
            CapabilityKind::Provider => find(&self.providers, name, |p| p.name.as_str()),
            CapabilityKind::Command => find(&self.commands, name, |c| c.name()),
            CapabilityKind::Status => find(&self.status, name, |s| s.name()),
            CapabilityKind::Panel => find(&self.panels, name, |p| p.name()),
        }
    }
}

impl Inner {
    /// Err when a key is taken by any owner, or appears twice in `keys`.
    fn check(&self, owner: &Owner, keys: &[(CapabilityKind, String)]) -> Result<(), Conflict> {
        for (kind, name) in keys {
            if let Some(taken_by) = self.owner_of(*kind, name) {
                return Err(Conflict {
                    kind: kind.as_str(),
                    name: name.clone(),
                    owner: taken_by.to_string(),
                });
            }
        }
        duplicates(owner, keys)
    }

    /// Adds a checked contribution set and its ledger row; returns the keys added.
    fn insert(
        &mut self,
        owner: &Owner,
        tool_source: &str,
        contributions: Contributions,
    ) -> Vec<Capability> {
        let keys = contributions.keys();
        let Contributions {
            tools,
            providers,
            commands,
            status,
            panels,
        } = contributions;
        let tools: Vec<ToolEntry> = tools
            .into_iter()
            .map(|tool| ToolEntry {
                tool,
                source: tool_source.to_owned(),
            })
            .collect();
        self.tools.extend(owned_all(owner, tools));
        self.providers.extend(owned_all(owner, providers));
        self.commands.extend(owned_all(owner, commands));
        self.status.extend(owned_all(owner, status));
        self.panels.extend(owned_all(owner, panels));
        self.ledger
            .entry(owner.clone())
            .or_default()
            .extend(keys.iter().cloned());
        keys.into_iter()
            .map(|(kind, name)| kind.capability(&name))
            .collect()
    }

    /// Removes what `owner`'s ledger row lists, and the row; returns the row.
    fn remove(&mut self, owner: &Owner) -> Vec<(CapabilityKind, String)> {
        let Some(row) = self.ledger.remove(owner) else {
            return Vec::new();
        };
        let listed =
            |kind: CapabilityKind, name: &str| row.iter().any(|(k, n)| *k == kind && n == name);
        fn keep<T>(
            entries: &mut Vec<Entry<T>>,
            owner: &Owner,
            name: impl Fn(&T) -> &str,
            listed: impl Fn(&str) -> bool,
        ) {
            entries.retain(|e| !(e.owner == *owner && listed(name(&e.item))));
        }
        keep(
            &mut self.tools,
            owner,
            |t| t.tool.name(),
            |n| listed(CapabilityKind::Tool, n),
        );
        keep(
            &mut self.providers,
            owner,
            |p| p.name.as_str(),
            |n| listed(CapabilityKind::Provider, n),
        );
        keep(
            &mut self.commands,
            owner,
            |c| c.name(),
            |n| listed(CapabilityKind::Command, n),
        );
        keep(
            &mut self.status,
            owner,
            |s| s.name(),
            |n| listed(CapabilityKind::Status, n),
        );
        keep(
            &mut self.panels,
            owner,
            |p| p.name(),
            |n| listed(CapabilityKind::Panel, n),
        );
        row
    }
}

/// Err naming the first key that appears twice in one contribution set.
fn duplicates(owner: &Owner, keys: &[(CapabilityKind, String)]) -> Result<(), Conflict> {
    let mut seen = std::collections::HashSet::new();
    for (kind, name) in keys {
        if !seen.insert((*kind, name.as_str())) {
            return Err(Conflict {
                kind: kind.as_str(),
                name: name.clone(),
                owner: owner.to_string(),
            });
        }
    }
    Ok(())
}

/// All registries behind one lock: installs and unwinds are atomic for every reader.
#[derive(Default)]
pub struct Registries {
    inner: RwLock<Inner>,
}

impl Registries {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read_locked()
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write_locked()
    }

    /// Registers every contribution for `owner`, or nothing when a name is taken (by
    /// another owner, or twice within the set). Returns the ledger row.
    pub fn install(
        &self,
        owner: &Owner,
        tool_source: &str,
        contributions: Contributions,
    ) -> Result<Vec<Capability>, Conflict> {
        let mut inner = self.write();
        inner.check(owner, &contributions.keys())?;
        Ok(inner.insert(owner, tool_source, contributions))
    }

    /// Removes exactly what `owner`'s ledger row lists, and the row. Returns it.
    pub fn unwind(&self, owner: &Owner) -> Vec<Capability> {
        self.write()
            .remove(owner)
            .into_iter()
            .map(|(kind, name)| kind.capability(&name))
            .collect()
    }

    /// Replaces `owner`'s contributions (MCP list changes) under one lock, so no reader
    /// ever sees the owner with nothing. Entries whose name another owner holds are
    /// skipped with a warning; a set that still conflicts (a name twice) leaves the old
    /// set in place. Returns the owner's ledger row afterwards.
    pub fn replace(
        &self,
        owner: &Owner,
        tool_source: &str,
        mut contributions: Contributions,
    ) -> Vec<Capability> {
        let mut inner = self.write();
        let taken = |kind, name: &str| {
            let other = inner.owner_of(kind, name).filter(|o| *o != owner);
            if other.is_some() {
                tracing::warn!(%owner, kind = kind.as_str(), name, "name taken; skipped");
            }
            other.is_none()
        };
        contributions
            .tools
            .retain(|t| taken(CapabilityKind::Tool, t.name()));
        contributions
            .commands
            .retain(|c| taken(CapabilityKind::Command, c.name()));
        contributions
            .providers
            .retain(|p| taken(CapabilityKind::Provider, &p.name));
        contributions
            .status
            .retain(|s| taken(CapabilityKind::Status, s.name()));
        contributions
            .panels
            .retain(|p| taken(CapabilityKind::Panel, p.name()));
        let keys = contributions.keys();
        if let Err(conflict) = duplicates(owner, &keys) {
            tracing::warn!(%owner, %conflict, "new contributions not registered; the old ones stay");
        } else {
            inner.remove(owner);
            inner.insert(owner, tool_source, contributions);
        }
        inner.capabilities(owner)
    }

    /// The ledger row of one owner.
    pub fn capabilities(&self, owner: &Owner) -> Vec<Capability> {
        self.read().capabilities(owner)
    }

    /// The tools in registration order, as the agent uses them.
    pub fn tools(&self) -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        for e in &self.read().tools {
            registry.register(e.item.tool.clone());
        }
        registry
    }

    /// The tools with their sources (`tool/list`).
    pub fn tool_entries(&self) -> Vec<ToolEntry> {
        self.read().tools.iter().map(|e| e.item.clone()).collect()
    }

    pub fn providers(&self) -> Vec<ProviderSpec> {
        self.read()
            .providers
            .iter()
            .map(|e| e.item.clone())
            .collect()
    }

    pub fn provider(&self, name: &str) -> Option<ProviderSpec> {
        self.read()
            .providers
            .iter()
            .find(|e| e.item.name.eq_ignore_ascii_case(name))
            .map(|e| e.item.clone())
    }

    pub fn commands(&self) -> Vec<Arc<dyn Command>> {
        self.read()
            .commands
            .iter()
            .map(|e| e.item.clone())
            .collect()
    }

    pub fn command(&self, name: &str) -> Option<Arc<dyn Command>> {
        self.read()
            .commands
            .iter()
            .find(|e| e.item.name() == name)
            .map(|e| e.item.clone())
    }

    pub fn status_segments(&self) -> Vec<Arc<dyn StatusSegment>> {
        self.read().status.iter().map(|e| e.item.clone()).collect()
    }

    pub fn panels(&self) -> Vec<Arc<dyn Panel>> {
        self.read().panels.iter().map(|e| e.item.clone()).collect()
    }
}

fn owned_all<T>(owner: &Owner, items: Vec<T>) -> Vec<Entry<T>> {
    items
        .into_iter()
        .map(|item| Entry {
            owner: owner.clone(),
            item,
        })
        .collect()
}

impl std::fmt::Debug for Registries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.read();
        f.debug_struct("Registries")
            .field("ledger", &inner.ledger)
            .finish()
    }
}

//! `PluginRuntime`: the lifecycle of SEED.md's state diagram, driving the registries.
//!
//! Registered → Active (initialize + install) → Deactivated (shutdown + unwind) → Active;
//! Registered → Failed when initialize fails; Active → Failed when install fails (a name
//! conflict included) or the plugin fails later (an external process that crashed);
//! Failed → Registered on reload, which `plugin/enable` does before enabling again.
//!
//! **Invariants:** a plugin that is not Active owns nothing in the registries; lifecycle
//! operations on one plugin run one at a time; a plugin's own failure never takes the
//! daemon or a session down.

use amber_proto::sync::Locked;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use amber_proto::{PluginInfo, PluginKind, PluginState};
use futures::future::BoxFuture;

use super::contrib::Contributions;
use super::registry::{Owner, Registries};

/// What a plugin gets when it is initialized.
#[derive(Clone)]
pub struct PluginContext {
    pub daemon_name: &'static str,
    pub daemon_version: &'static str,
    /// Reports a failure after initialize (a crashed process): the runtime unwinds it.
    pub failures: FailureReporter,
}

/// A plugin: bundled (compiled in) or external (a child process).
pub trait Plugin: Send + Sync {
    fn name(&self) -> &str;

    fn kind(&self) -> PluginKind {
        PluginKind::Bundled
    }

    /// The `source` of its tools in `tool/list`.
    fn tool_source(&self) -> String {
        format!("plugin:{}", self.name())
    }

    /// Prepare to run (start a process, handshake). `Err` is SEED's "initialize returned
    /// false": the plugin goes Failed with that error.
    fn initialize(&self, ctx: PluginContext) -> BoxFuture<'_, Result<(), String>>;

    /// Declare contributions. Called after a successful initialize.
    fn install(&self, into: &mut Contributions) -> Result<(), String>;

    /// Stop (after its contributions were unwound). Must not hang: bound any wait.
    fn shutdown(&self) -> BoxFuture<'_, ()>;
}

/// Lets a running plugin report that it broke.
#[derive(Clone)]
pub struct FailureReporter {
    runtime: Weak<PluginRuntime>,
    plugin: String,
    /// Which enable this reporter belongs to: a stale one (an old process) is ignored.
    epoch: u64,
}

impl FailureReporter {
    /// Marks the plugin Failed with `error` and unwinds its contributions.
    pub fn failed(&self, error: impl Into<String>) {
        if let Some(runtime) = self.runtime.upgrade() {
            runtime.fail(&self.plugin, self.epoch, error.into());
        }
    }
}

/// Errors of lifecycle requests (not of plugins: those become the Failed state).
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("no plugin named `{name}`; known: {known}")]
    Unknown { name: String, known: String },
    #[error("a plugin named `{0}` is already registered")]
    Duplicate(String),
}

struct Slot {
    plugin: Arc<dyn Plugin>,
    state: PluginState,
    error: Option<String>,
    /// A failure reported while enabling, applied once the enable finishes.
    failed_while_enabling: Option<String>,
    /// Bumped by every enable and disable.
    epoch: u64,
    /// Serializes this plugin's enable/disable (one slow plugin never holds up another).
    op: Arc<tokio::sync::Mutex<()>>,
}

/// Owns every plugin and its state; the only writer of plugin contributions.
pub struct PluginRuntime {
    registries: Arc<Registries>,
    slots: Mutex<Vec<Slot>>,
    /// Called after every change of the registries (e.g. to drop cached LLM clients).
    on_change: Box<dyn Fn() + Send + Sync>,
    weak: Weak<PluginRuntime>,
}

impl PluginRuntime {
    pub fn new(
        registries: Arc<Registries>,
        on_change: impl Fn() + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new_cyclic(|weak| PluginRuntime {
            registries,
            slots: Mutex::new(Vec::new()),
            on_change: Box::new(on_change),
            weak: weak.clone(),
        })
    }

    pub fn registries(&self) -> &Arc<Registries> {
        &self.registries
    }

    fn slots(&self) -> MutexGuard<'_, Vec<Slot>> {
        self.slots.locked()
    }

    /// Adds a plugin in the Registered state.
    pub fn register(&self, plugin: Arc<dyn Plugin>) -> Result<(), PluginError> {
        let mut slots = self.slots();
        if slots.iter().any(|s| s.plugin.name() == plugin.name()) {
            return Err(PluginError::Duplicate(plugin.name().to_owned()));
        }
        slots.push(Slot {
            plugin,
            state: PluginState::Registered,
            error: None,
            failed_while_enabling: None,
            epoch: 0,
            op: Arc::new(tokio::sync::Mutex::new(())),
        });
        Ok(())
    }

    /// Every plugin's row, in registration order.
    pub fn list(&self) -> Vec<PluginInfo> {
        let slots = self.slots();
        slots.iter().map(|s| self.row(s)).collect()
    }

    /// One plugin's row.
    pub fn info(&self, name: &str) -> Result<PluginInfo, PluginError> {
        let slots = self.slots();
        let slot = find(&slots, name)?;
        Ok(self.row(slot))
    }

    fn row(&self, slot: &Slot) -> PluginInfo {
        let owner = Owner::Plugin(slot.plugin.name().to_owned());
        PluginInfo {
            name: slot.plugin.name().to_owned(),
            state: slot.state,
            kind: slot.plugin.kind(),
            capabilities: self.registries.capabilities(&owner),
            error: slot.error.clone(),
        }
    }

    fn plugin(&self, name: &str) -> Result<(Arc<dyn Plugin>, PluginState), PluginError> {
        let slots = self.slots();
        let slot = find(&slots, name)?;
        Ok((slot.plugin.clone(), slot.state))
    }

    fn set(&self, name: &str, state: PluginState, error: Option<String>) {
        if let Some(slot) = self.slots().iter_mut().find(|s| s.plugin.name() == name) {
            slot.state = state;
            slot.error = error;
        }
    }

    /// Enables a plugin: Failed is reloaded to Registered first; Active stays Active.
    pub async fn enable(&self, name: &str) -> Result<PluginInfo, PluginError> {
        let _op = self.op_lock(name)?.lock_owned().await;
        let (plugin, state) = self.plugin(name)?;
        match state {
            PluginState::Active => return self.info(name),
            PluginState::Failed => {
                tracing::info!(plugin = name, "reloading failed plugin");
                self.set(name, PluginState::Registered, None);
            }
            PluginState::Registered | PluginState::Deactivated => {}
        }
        let epoch = self.bump(name);
        let ctx = PluginContext {
            daemon_name: crate::NAME,
            daemon_version: crate::VERSION,
            failures: FailureReporter {
                runtime: self.weak.clone(),
                plugin: name.to_owned(),
                epoch,
            },
        };
        if let Err(error) = plugin.initialize(ctx).await {
            tracing::warn!(plugin = name, %error, "plugin failed to initialize");
            self.set(
                name,
                PluginState::Failed,
                Some(format!("initialize failed: {error}")),
            );
            return self.info(name);
        }
        let mut contributions = Contributions::default();
        let installed = plugin.install(&mut contributions).and_then(|()| {
            let owner = Owner::Plugin(name.to_owned());
            self.registries
                .install(&owner, &plugin.tool_source(), contributions)
                .map_err(|conflict| conflict.to_string())
        });
        match installed {
            Ok(capabilities) => {
                tracing::info!(
                    plugin = name,
                    contributions = capabilities.len(),
                    "plugin active"
                );
                self.set(name, PluginState::Active, None);
                (self.on_change)();
                let late = self
                    .slots()
                    .iter_mut()
                    .find(|s| s.plugin.name() == name)
                    .and_then(|s| s.failed_while_enabling.take());
                if let Some(error) = late {
                    self.fail(name, epoch, error);
                }
            }
            Err(error) => {
                tracing::warn!(plugin = name, %error, "plugin failed to install");
                plugin.shutdown().await;
                self.set(
                    name,
                    PluginState::Failed,
                    Some(format!("install failed: {error}")),
                );
            }
        }
        self.info(name)
    }

    /// Disables an Active plugin: unwind its contributions, then shut it down.
    /// Any other state is left as it is (a Failed plugin already owns nothing).
    pub async fn disable(&self, name: &str) -> Result<PluginInfo, PluginError> {
        let _op = self.op_lock(name)?.lock_owned().await;
        let (plugin, state) = self.plugin(name)?;
        if state == PluginState::Active {
            self.bump(name);
            let removed = self.registries.unwind(&Owner::Plugin(name.to_owned()));
            (self.on_change)();
            self.set(name, PluginState::Deactivated, None);
            plugin.shutdown().await;
            tracing::info!(
                plugin = name,
                contributions = removed.len(),
                "plugin deactivated"
            );
        }
        self.info(name)
    }

    /// A running plugin broke (reported by its run `epoch`): unwind it and mark it Failed
    /// (`plugin/enable` restarts it). A report from an earlier run is ignored.
    fn fail(&self, name: &str, epoch: u64, error: String) {
        let plugin = {
            let mut slots = self.slots();
            let Some(slot) = slots.iter_mut().find(|s| s.plugin.name() == name) else {
                return;
            };
            if epoch != slot.epoch {
                tracing::debug!(plugin = name, %error, "failure of an earlier run ignored");
                return;
            }
            if slot.state != PluginState::Active {
                // Still enabling: the enable applies it when it finishes.
                slot.failed_while_enabling = Some(error);
                return;
            }
            slot.state = PluginState::Failed;
            slot.error = Some(error.clone());
            (slot.plugin.clone(), slot.op.clone())
        };
        tracing::warn!(plugin = name, %error, "plugin failed; unwinding its contributions");
        self.registries.unwind(&Owner::Plugin(name.to_owned()));
        (self.on_change)();
        // Stop what is left of it (kill the process) without blocking the reporter.
        // Under the plugin's op lock, so a `plugin/enable` racing it starts the fresh
        // process only after this one is gone.
        let (plugin, op) = plugin;
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _op = op.lock_owned().await;
                plugin.shutdown().await;
            });
        }
    }

    /// Shuts every Active plugin down (daemon exit).
    pub async fn shutdown(&self) {
        let names: Vec<String> = self
            .slots()
            .iter()
            .filter(|s| s.state == PluginState::Active)
            .map(|s| s.plugin.name().to_owned())
            .collect();
        for name in names {
            // Errors are impossible here: the name was just listed.
            let _ = self.disable(&name).await;
        }
    }

    /// Names of every plugin.
    pub fn names(&self) -> Vec<String> {
        self.slots()
            .iter()
            .map(|s| s.plugin.name().to_owned())
            .collect()
    }
}

impl PluginRuntime {
    fn op_lock(&self, name: &str) -> Result<Arc<tokio::sync::Mutex<()>>, PluginError> {
        let slots = self.slots();
        Ok(find(&slots, name)?.op.clone())
    }

    /// Starts a new epoch for `name`; earlier reporters go stale.
    fn bump(&self, name: &str) -> u64 {
        let mut slots = self.slots();
        match slots.iter_mut().find(|s| s.plugin.name() == name) {
            Some(slot) => {
                slot.epoch += 1;
                slot.failed_while_enabling = None;
                slot.epoch
            }
            None => 0,
        }
    }
}

fn find<'a>(slots: &'a [Slot], name: &str) -> Result<&'a Slot, PluginError> {
    slots
        .iter()
        .find(|s| s.plugin.name() == name)
        .ok_or_else(|| PluginError::Unknown {
            name: name.to_owned(),
            known: slots
                .iter()
                .map(|s| s.plugin.name())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

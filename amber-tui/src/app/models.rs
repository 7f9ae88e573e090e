//! `/model` without arguments: a picker of the models the daemon can reach — what the
//! session's provider lists (`provider/check`, asked by the daemon with its key) and each
//! configured provider's default model (`provider/list`) — the session's own model marked.
//! Enter runs the daemon's `/model MODEL @PROVIDER`, so choosing pins the model exactly as
//! typing it would. `/model NAME` still goes straight to the daemon.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::{Action, App};

/// One model on offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelChoice {
    pub model: String,
    /// The provider's name from `provider/list`.
    pub provider: String,
}

/// The picker's state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelPicker {
    pub choices: Vec<ModelChoice>,
    pub selected: usize,
    /// The lists are on their way.
    pub loading: bool,
    /// Why nothing could be listed.
    pub error: Option<String>,
}

impl App {
    /// Opens the picker and asks for the lists.
    pub(crate) fn open_model_picker(&mut self) {
        self.model_picker = Some(ModelPicker {
            loading: true,
            ..ModelPicker::default()
        });
        let provider = self.session.as_ref().and_then(|s| s.provider.clone());
        self.request(Action::ListModels { provider });
    }

    /// The lists came: the session's model is selected when it is among them.
    pub fn on_models(&mut self, result: Result<Vec<ModelChoice>, String>) {
        let Some(picker) = self.model_picker.as_mut() else {
            return;
        };
        picker.loading = false;
        match result {
            Ok(choices) => {
                let current = self.session.as_ref().map(|s| s.model.as_str());
                picker.selected = choices
                    .iter()
                    .position(|c| Some(c.model.as_str()) == current)
                    .unwrap_or(0);
                picker.choices = choices;
            }
            Err(e) => picker.error = Some(e),
        }
    }

    /// The picker has every key while open.
    pub(super) fn model_picker_key(&mut self, key: KeyEvent) {
        let Some(picker) = self.model_picker.as_mut() else {
            return;
        };
        let last = picker.choices.len().saturating_sub(1);
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => self.model_picker = None,
            KeyCode::Up | KeyCode::Char('k') => picker.selected = picker.selected.saturating_sub(1),
            KeyCode::Char('p') if ctrl => picker.selected = picker.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => picker.selected = (picker.selected + 1).min(last),
            KeyCode::Char('n') if ctrl => picker.selected = (picker.selected + 1).min(last),
            KeyCode::Home => picker.selected = 0,
            KeyCode::End => picker.selected = last,
            KeyCode::Enter => {
                let chosen = picker.choices.get(picker.selected).cloned();
                self.model_picker = None;
                if let Some(choice) = chosen {
                    self.request(Action::RunCommand {
                        name: "model".to_owned(),
                        args: format!("{} @{}", choice.model, choice.provider),
                    });
                }
            }
            _ => {}
        }
    }
}

/// The picker's rows: the session's provider's listed models first (its default among
/// them, first), then every other provider's default model; no row twice.
pub fn choices(
    providers: &[amber_proto::ProviderInfo],
    session_provider: Option<&str>,
    listed: &[String],
) -> Vec<ModelChoice> {
    let own = providers
        .iter()
        .find(|p| Some(p.name.as_str()) == session_provider)
        .or_else(|| providers.iter().find(|p| p.default));
    let mut out: Vec<ModelChoice> = Vec::new();
    let mut add = |model: &str, provider: &str| {
        let choice = ModelChoice {
            model: model.to_owned(),
            provider: provider.to_owned(),
        };
        if !model.is_empty() && !out.contains(&choice) {
            out.push(choice);
        }
    };
    if let Some(own) = own {
        add(&own.default_model, &own.name);
        for model in listed {
            add(model, &own.name);
        }
    }
    for p in providers {
        add(&p.default_model, &p.name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::ProviderInfo;

    fn provider(name: &str, model: &str, default: bool) -> ProviderInfo {
        ProviderInfo {
            name: name.into(),
            flavor: "openai".into(),
            base_url: None,
            default_model: model.into(),
            context_window: 128_000,
            default,
        }
    }

    fn choice(model: &str, provider: &str) -> ModelChoice {
        ModelChoice {
            model: model.into(),
            provider: provider.into(),
        }
    }

    #[test]
    fn the_sessions_provider_comes_first_then_the_others_defaults() {
        let providers = [
            provider("local", "qwen3", true),
            provider("anthropic", "claude-sonnet-4-5", false),
        ];
        let listed = ["llama3".to_owned(), "qwen3".to_owned()];
        assert_eq!(
            choices(&providers, None, &listed),
            [
                choice("qwen3", "local"),
                choice("llama3", "local"),
                choice("claude-sonnet-4-5", "anthropic"),
            ]
        );
        assert_eq!(
            choices(&providers, Some("anthropic"), &[]),
            [
                choice("claude-sonnet-4-5", "anthropic"),
                choice("qwen3", "local"),
            ]
        );
    }

    #[test]
    fn enter_pins_the_chosen_model_through_the_daemons_command() {
        let mut app = App::new("s1");
        app.open_model_picker();
        assert_eq!(app.drain_actions(), [Action::ListModels { provider: None }]);
        app.on_models(Ok(vec![choice("a", "local"), choice("b", "local")]));
        let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
        app.on_key(key(KeyCode::Down));
        let actions = app.on_key(key(KeyCode::Enter));
        assert_eq!(
            actions,
            [Action::RunCommand {
                name: "model".into(),
                args: "b @local".into()
            }]
        );
        assert!(app.model_picker.is_none());
    }

    #[test]
    fn esc_closes_it_without_a_change() {
        let mut app = App::new("s1");
        app.open_model_picker();
        app.drain_actions();
        app.on_models(Err("no provider".into()));
        let actions = app.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        assert!(actions.is_empty());
        assert!(app.model_picker.is_none());
    }
}

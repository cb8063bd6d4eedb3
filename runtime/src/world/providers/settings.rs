//! Where the live providers are and which keys they use (`LiveSettings`, read from variables the CLI passes in), the `Providers` built from them, and the check that a spec's roles can all be served before a run starts.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use charter_compiler::graph::CompiledSpec;

use super::anthropic::ANTHROPIC_BASE_URL;
use super::openai::OPENAI_BASE_URL;
use super::{AnthropicConfig, AnthropicProvider, ApiKey, OpenAiConfig, OpenAiProvider, Providers};
use crate::engine::provider::ProviderError;
use crate::world::tools::ToolBox;

/// The live providers' addresses and keys.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct LiveSettings {
    /// `OPENAI_BASE_URL` (default [`OPENAI_BASE_URL`]).
    pub openai_base_url: Option<String>,
    /// `OPENAI_API_KEY`.
    pub openai_api_key: Option<ApiKey>,
    /// `ANTHROPIC_BASE_URL` (default [`ANTHROPIC_BASE_URL`]).
    pub anthropic_base_url: Option<String>,
    /// `ANTHROPIC_API_KEY`.
    pub anthropic_api_key: Option<ApiKey>,
}

impl LiveSettings {
    /// The settings named by `variables` (e.g. `std::env::vars()`, passed in by the CLI:
    /// the library reads no environment). Empty values count as unset.
    pub fn from_variables(variables: impl IntoIterator<Item = (String, String)>) -> Self {
        let variables: BTreeMap<String, String> = variables
            .into_iter()
            .filter(|(_, value)| !value.trim().is_empty())
            .collect();
        let text = |name: &str| variables.get(name).map(|value| value.trim().to_string());
        LiveSettings {
            openai_base_url: text("OPENAI_BASE_URL"),
            openai_api_key: text("OPENAI_API_KEY").map(ApiKey::new),
            anthropic_base_url: text("ANTHROPIC_BASE_URL"),
            anthropic_api_key: text("ANTHROPIC_API_KEY").map(ApiKey::new),
        }
    }

    /// The provider names these settings can serve: `openai` with a key or a base URL of
    /// its own (local servers need no key), `anthropic` with a key.
    pub fn available(&self) -> BTreeSet<&'static str> {
        let mut names = BTreeSet::new();
        if self.openai_api_key.is_some() || self.openai_base_url.is_some() {
            names.insert("openai");
        }
        if self.anthropic_api_key.is_some() {
            names.insert("anthropic");
        }
        names
    }

    /// What keeps `spec` from running live, one line per provider: a provider no setting
    /// serves, with the roles that use it and the variable to set. Empty: it can run.
    pub fn missing_for(&self, spec: &CompiledSpec) -> Vec<String> {
        let available = self.available();
        let mut roles_by_provider: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, role) in &spec.roles {
            roles_by_provider
                .entry(role.model.provider.as_str())
                .or_default()
                .push(name.as_str());
        }
        roles_by_provider
            .into_iter()
            .filter(|(provider, _)| !available.contains(provider))
            .map(|(provider, roles)| {
                let roles = roles.join(", ");
                match provider {
                    "openai" => format!(
                        "roles {roles} use `openai`: set OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)"
                    ),
                    "anthropic" => {
                        format!("roles {roles} use `anthropic`: set ANTHROPIC_API_KEY")
                    }
                    other => format!(
                        "roles {roles} use `{other}`, which is not a live provider (live providers: openai, anthropic)"
                    ),
                }
            })
            .collect()
    }

    /// The keys, for a recording to scrub. A key shorter than
    /// [`MIN_SECRET_LEN`](crate::world::secrets::MIN_SECRET_LEN) is a placeholder, not a
    /// secret (a local server takes any key, and `OPENAI_API_KEY=x` is common): scrubbing
    /// it would replace every `x` in every answer and break its contract.
    pub fn secrets(&self) -> Vec<String> {
        [&self.openai_api_key, &self.anthropic_api_key]
            .into_iter()
            .flatten()
            .map(|key| key.expose().to_string())
            .filter(|key| key.chars().count() >= crate::world::secrets::MIN_SECRET_LEN)
            .collect()
    }

    /// A router over every provider these settings serve, running tools through `tools`.
    pub fn providers(&self, tools: Arc<ToolBox>) -> Result<Providers, ProviderError> {
        let available = self.available();
        let mut providers = Providers::new().with_tools(tools.clone());
        if available.contains("openai") {
            let config = OpenAiConfig::new(
                self.openai_base_url
                    .clone()
                    .unwrap_or_else(|| OPENAI_BASE_URL.to_string()),
                self.openai_api_key.clone(),
            );
            providers = providers.with(
                "openai",
                Arc::new(OpenAiProvider::new(config, tools.clone())?),
            );
        }
        if available.contains("anthropic") {
            let config = AnthropicConfig::new(
                self.anthropic_base_url
                    .clone()
                    .unwrap_or_else(|| ANTHROPIC_BASE_URL.to_string()),
                self.anthropic_api_key.clone(),
            );
            providers = providers.with(
                "anthropic",
                Arc::new(AnthropicProvider::new(config, tools)?),
            );
        }
        Ok(providers)
    }
}

/// By hand: keys are shown only as set or not.
impl fmt::Debug for LiveSettings {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("LiveSettings")
            .field("openai_base_url", &self.openai_base_url)
            .field("openai_api_key", &self.openai_api_key)
            .field("anthropic_base_url", &self.anthropic_base_url)
            .field("anthropic_api_key", &self.anthropic_api_key)
            .finish()
    }
}

//! The tools a session offers: manifests joined with their implementations.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{
    Tool, ToolManifest, delegate, desktop, edit, exec, fs, manifests, plan, search, write,
};

#[derive(Clone)]
pub struct RegisteredTool {
    pub manifest: Arc<ToolManifest>,
    pub tool: Arc<dyn Tool>,
}

/// Name → tool, in a stable order (the order the model sees them in).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, RegisteredTool>,
    /// Tools of MCP servers that are down: not offered, but a call the model still makes
    /// reaches them (and restarts their server).
    withdrawn: BTreeMap<String, RegisteredTool>,
    /// Tools this session cannot run (its desktop lacks what they need), with the reason: not
    /// offered, and a call to one is refused with the reason before it reaches the gate.
    withheld: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Manifest(#[from] &'static super::manifest::ManifestError),
    #[error("built-in tool {0} has no manifest in tools/")]
    MissingManifest(&'static str),
}

/// Prefixes models trained on other runtimes write before a tool's name.
const NAMESPACES: &[&str] = &["functions.", "tools.", "default_api."];

impl ToolRegistry {
    /// Every built-in tool this build implements.
    pub fn builtin() -> Result<Self, RegistryError> {
        let implementations: Vec<Arc<dyn Tool>> = vec![
            Arc::new(fs::ReadFile),
            Arc::new(fs::ListDirectory),
            Arc::new(search::SearchFiles),
            Arc::new(write::WriteFile),
            Arc::new(edit::EditFile),
            Arc::new(edit::ApplyPatch),
            Arc::new(exec::Shell),
            Arc::new(exec::Python),
            Arc::new(desktop::Screenshot),
            Arc::new(desktop::Computer),
            Arc::new(desktop::Windows),
            Arc::new(desktop::ClipboardRead),
            Arc::new(desktop::ClipboardWrite),
            Arc::new(desktop::Notify),
            Arc::new(desktop::OpenUrl),
            Arc::new(plan::UpdatePlan),
            Arc::new(delegate::Delegate),
            Arc::new(delegate::DelegateMerge),
        ];
        let all = manifests()?;
        let mut tools = BTreeMap::new();
        for tool in implementations {
            let manifest = all
                .iter()
                .find(|m| m.name == tool.name())
                .ok_or(RegistryError::MissingManifest(tool.name()))?;
            let manifest = Arc::new(manifest.clone());
            tools.insert(manifest.name.clone(), RegisteredTool { manifest, tool });
        }
        Ok(ToolRegistry {
            tools,
            withdrawn: BTreeMap::new(),
            withheld: BTreeMap::new(),
        })
    }

    /// These tools (an MCP server's) on top of the built-in ones; `withdrawn` are known but
    /// not offered. A name already taken keeps its first owner.
    pub fn with_extra(
        &self,
        offered: impl IntoIterator<Item = RegisteredTool>,
        withdrawn: impl IntoIterator<Item = RegisteredTool>,
    ) -> ToolRegistry {
        let mut registry = self.clone();
        for tool in offered {
            registry
                .tools
                .entry(tool.manifest.name.clone())
                .or_insert(tool);
        }
        for tool in withdrawn {
            if !registry.tools.contains_key(&tool.manifest.name) {
                registry
                    .withdrawn
                    .entry(tool.manifest.name.clone())
                    .or_insert(tool);
            }
        }
        registry
    }

    /// Withholds the tools whose manifest needs what `presence` lacks; returns them with the
    /// reason, in name order.
    pub fn withhold_unusable(&mut self, presence: &super::Presence) -> Vec<(String, String)> {
        let unusable: Vec<(String, String)> = self
            .tools
            .iter()
            .filter_map(|(name, tool)| {
                tool.manifest
                    .needs
                    .iter()
                    .find_map(|need| presence.lacks(*need))
                    .map(|why| (name.clone(), why.to_string()))
            })
            .collect();
        for (name, why) in &unusable {
            self.tools.remove(name);
            self.withheld.insert(name.clone(), why.clone());
        }
        unusable
    }

    /// Why a tool this build has is not offered in this session, if it was withheld.
    pub fn withheld(&self, name: &str) -> Option<&str> {
        self.withheld.get(name).map(String::as_str)
    }

    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.tools.get(name).or_else(|| self.withdrawn.get(name))
    }

    /// Whether the tool is offered now (a withdrawn one is known but not offered).
    pub fn offered(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// The registered name a model meant: its own, or with the namespace some models put in
    /// front (`functions.read_file`, `tools.…`, `default_api.…`) left off. A name that is not a
    /// tool either way comes back as it was, so it is refused as unknown.
    pub fn canonical_name(&self, name: &str) -> String {
        if self.get(name).is_some() {
            return name.to_string();
        }
        NAMESPACES
            .iter()
            .filter_map(|prefix| name.strip_prefix(prefix))
            .find(|bare| self.get(bare).is_some())
            .unwrap_or(name)
            .to_string()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespaced_name_means_the_tool_and_an_unknown_one_stays_unknown() {
        let tools = ToolRegistry::builtin().unwrap();
        for name in [
            "read_file",
            "functions.read_file",
            "tools.read_file",
            "default_api.read_file",
        ] {
            assert_eq!(tools.canonical_name(name), "read_file", "{name}");
        }
        // Only a whole known prefix comes off, and only when a tool is left.
        for name in [
            "functions.nope",
            "fn.read_file",
            "functions.functions.read_file",
            "",
        ] {
            assert_eq!(tools.canonical_name(name), name, "{name}");
            assert!(tools.get(&tools.canonical_name(name)).is_none(), "{name}");
        }
    }
}

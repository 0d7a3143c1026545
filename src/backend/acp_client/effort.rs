//! An ACP agent's effort: ACP has no effort field, but agents publish a session config option
//! for it (claude-agent-acp's `effort`; the spec's category `thought_level`), set with
//! `session/set_config_option` like the model. An agent without one gets a note instead.

use serde_json::Value;

use super::{AcpBackend, option_values, shorten};
use crate::model::Effort;

/// What was applied, and the option's value before corral touched it (to go back to).
#[derive(Debug, Default)]
pub(super) struct Applied {
    effort: Option<Effort>,
    original: Option<Value>,
}

/// The agent's effort option: category `thought_level`, else an id that names effort.
fn effort_option(options: &Value) -> Option<Value> {
    let all = options.as_array()?;
    all.iter()
        .find(|o| o["category"] == "thought_level")
        .or_else(|| {
            all.iter().find(|o| {
                matches!(
                    o["id"].as_str(),
                    Some("effort" | "thought_level" | "reasoning_effort")
                )
            })
        })
        .cloned()
}

impl AcpBackend {
    pub(super) async fn apply_effort(&mut self, effort: Option<Effort>) -> Result<(), String> {
        if effort == self.effort.effort {
            return Ok(());
        }
        let shown = effort.map_or("default", Effort::as_str);
        if self.dead {
            return Err(format!(
                "effort {shown} is not applied: the agent is not running"
            ));
        }
        let options = self
            .shared
            .config_options
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(entry) = effort_option(&options) else {
            return Err(format!(
                "effort {shown} is not applied: {} offers no effort setting over ACP (no \
                 configOptions entry of category thought_level)",
                self.agent_name
            ));
        };
        let value = match effort {
            Some(effort) => {
                let values = option_values(&entry);
                match values
                    .iter()
                    .find(|v| v.eq_ignore_ascii_case(effort.as_str()))
                {
                    Some(value) => Value::String(value.clone()),
                    None => {
                        return Err(format!(
                            "effort {shown} is not applied: {} offers the levels {}",
                            self.agent_name,
                            shorten(&values)
                        ));
                    }
                }
            }
            None => match &self.effort.original {
                Some(original) => original.clone(),
                None => return Ok(()),
            },
        };
        self.set_config_option(&entry["id"], value)
            .await
            .map_err(|e| {
                format!(
                    "effort {shown} is not applied: {} refused it: {e}",
                    self.agent_name
                )
            })?;
        if self.effort.original.is_none() {
            self.effort.original = Some(entry["currentValue"].clone());
        }
        self.effort.effort = effort;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_effort_option_is_found_by_category_then_id() {
        let options = json!([
            {"id": "model", "category": "model"},
            {"id": "depth", "category": "thought_level", "currentValue": "low"},
            {"id": "effort"}
        ]);
        assert_eq!(effort_option(&options).unwrap()["id"], "depth");
        let by_id = json!([{"id": "model"}, {"id": "effort", "currentValue": "high"}]);
        assert_eq!(effort_option(&by_id).unwrap()["id"], "effort");
        assert!(effort_option(&json!([{"id": "model"}])).is_none());
        assert!(effort_option(&Value::Null).is_none());
    }
}

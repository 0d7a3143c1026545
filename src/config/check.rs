//! What a loaded config must satisfy beyond its types: known names and every number in range.

use std::path::Path;

use super::range::{self, MAX_SECS, RangeError};
use super::{Config, ConfigError};

/// Seconds keys that are whole numbers: at least 1, at most 30 days.
const MAX_SECS_INT: u64 = MAX_SECS as u64;
/// Milliseconds of a retry delay: at most a day.
const MAX_DELAY_MS: u64 = 24 * 3600 * 1000;
/// Context windows and token counts: far above any model.
const MAX_TOKENS: u64 = 100_000_000;
const GIB: u64 = 1024 * 1024 * 1024;

/// More names than anyone keeps instructions under.
const MAX_INSTRUCTION_NAMES: usize = 16;

/// Instruction files are looked up by name in each directory: a name is one plain file name,
/// so no entry can reach into another directory.
fn check_instruction_names(names: &[String]) -> Result<(), String> {
    if names.len() > MAX_INSTRUCTION_NAMES {
        return Err(format!(
            "instructions lists {} names; at most {MAX_INSTRUCTION_NAMES}",
            names.len()
        ));
    }
    let plain = |name: &str| {
        let mut parts = Path::new(name).components();
        matches!(
            (parts.next(), parts.next()),
            (Some(std::path::Component::Normal(_)), None)
        ) && !name.contains(['/', '\0'])
    };
    match names.iter().find(|name| !plain(name)) {
        Some(name) => Err(format!(
            "instructions must list plain file names such as \"AGENTS.md\", got {name:?}"
        )),
        None => Ok(()),
    }
}

impl Config {
    pub(super) fn check(&self, path: &Path) -> Result<(), ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        for (name, provider) in &self.providers {
            if let Some(url) = &provider.base_url {
                crate::model::check_base_url(&format!("providers.{name}.base_url"), url)
                    .map_err(invalid)?;
            }
        }
        if let Some(names) = &self.instructions {
            check_instruction_names(names).map_err(invalid)?;
        }
        super::mcp::check_servers(&self.mcp_servers).map_err(|e| invalid(e.to_string()))?;
        if let Some(root) = self.server.roots.iter().find(|r| !r.is_absolute()) {
            return Err(invalid(format!(
                "server.roots must be absolute paths, got {}",
                root.display()
            )));
        }
        self.check_numbers()
            .map_err(|e: RangeError| invalid(e.to_string()))
    }

    /// Every numeric key, named as written in the file.
    fn check_numbers(&self) -> Result<(), RangeError> {
        use range::{float, int};
        int("max_steps", self.max_steps, 1, 100_000)?;
        int("max_tokens", self.max_tokens, 1, MAX_TOKENS)?;
        float("temperature", self.temperature.map(f64::from), 0.0, 2.0)?;
        int("tool_output_cap", self.tool_output_cap, 256, GIB)?;
        float("compaction_threshold", self.compaction_threshold, 0.1, 1.0)?;
        int(
            "approval_timeout_secs",
            self.approval_timeout_secs,
            1,
            MAX_SECS_INT,
        )?;
        int(
            "shell_timeout_secs",
            self.shell_timeout_secs,
            1,
            MAX_SECS_INT,
        )?;
        int(
            "screenshot_max_long_edge",
            self.screenshot_max_long_edge,
            64,
            16_384,
        )?;
        for (name, secs) in [
            ("timeouts.connect_secs", self.timeouts.connect_secs),
            ("timeouts.idle_secs", self.timeouts.idle_secs),
        ] {
            if let Some(s) = secs {
                range::seconds(name, s)?;
            }
        }
        int("retry.max_attempts", self.retry.max_attempts, 1, 100)?;
        int(
            "retry.base_delay_ms",
            self.retry.base_delay_ms,
            0,
            MAX_DELAY_MS,
        )?;
        int(
            "retry.max_delay_ms",
            self.retry.max_delay_ms,
            0,
            MAX_DELAY_MS,
        )?;
        let limits = &self.limits;
        int(
            "limits.max_stream_line_bytes",
            limits.max_stream_line_bytes,
            1024,
            4 * GIB,
        )?;
        int(
            "limits.max_error_body_bytes",
            limits.max_error_body_bytes,
            256,
            GIB,
        )?;
        int(
            "agents.acp_permission_timeout_secs",
            self.agents.acp_permission_timeout_secs,
            1,
            MAX_SECS_INT,
        )?;
        // 0 turns these off.
        int(
            "agents.idle_sleep_secs",
            self.agents.idle_sleep_secs,
            0,
            MAX_SECS_INT,
        )?;
        int("agents.stall_secs", self.agents.stall_secs, 0, MAX_SECS_INT)?;
        int(
            "agents.stall_grace_secs",
            self.agents.stall_grace_secs,
            1,
            MAX_SECS_INT,
        )?;
        int(
            "tui.notify_after_secs",
            self.tui.notify_after_secs,
            1,
            MAX_SECS_INT,
        )?;
        int(
            "server.max_sessions_per_owner",
            self.server.max_sessions_per_owner,
            1,
            100_000,
        )?;
        let local = &self.local;
        int("local.context_size", local.context_size, 256, MAX_TOKENS)?;
        int("local.threads", local.threads, 1, 4096)?;
        int("local.parallel", local.parallel, 1, 1024)?;
        int(
            "local.startup_timeout_secs",
            local.startup_timeout_secs,
            1,
            MAX_SECS_INT,
        )?;
        for (name, provider) in &self.providers {
            int(
                &format!("providers.{name}.num_ctx"),
                provider.num_ctx,
                256,
                MAX_TOKENS,
            )?;
            let key = format!("providers.{name}.context_window");
            int(&key, provider.context_window, 256, MAX_TOKENS)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every numeric key of the file, as `(section, key)`.
    const NUMERIC_KEYS: &[(&str, &str)] = &[
        ("", "max_steps"),
        ("", "max_tokens"),
        ("", "temperature"),
        ("", "tool_output_cap"),
        ("", "compaction_threshold"),
        ("", "approval_timeout_secs"),
        ("", "shell_timeout_secs"),
        ("", "screenshot_max_long_edge"),
        ("timeouts", "connect_secs"),
        ("timeouts", "idle_secs"),
        ("retry", "max_attempts"),
        ("retry", "base_delay_ms"),
        ("retry", "max_delay_ms"),
        ("limits", "max_stream_line_bytes"),
        ("limits", "max_error_body_bytes"),
        ("server", "max_sessions_per_owner"),
        ("agents", "acp_permission_timeout_secs"),
        ("agents", "idle_sleep_secs"),
        ("agents", "stall_secs"),
        ("agents", "stall_grace_secs"),
        ("tui", "notify_after_secs"),
        ("local", "context_size"),
        ("local", "threads"),
        ("local", "parallel"),
        ("local", "startup_timeout_secs"),
        ("providers.ollama", "num_ctx"),
        ("providers.llamacpp", "context_window"),
    ];

    fn random_number(rng: &mut fastrand::Rng) -> String {
        const SPECIAL: &[&str] = &[
            "nan",
            "+nan",
            "inf",
            "-inf",
            "0",
            "0.0",
            "-0.0",
            "-1",
            "1",
            "1e300",
            "-1e300",
            "5e-324",
            "18446744073709551615",
            "18446744073709551616",
            "9223372036854775807",
            "-9223372036854775808",
            "4294967295",
            "4294967296",
            "2.5",
            "0.5",
            "1e-9",
        ];
        match rng.u8(0..4) {
            0 => SPECIAL[rng.usize(..SPECIAL.len())].to_string(),
            1 => rng.i64(..).to_string(),
            2 => format!("{:e}", f64::from_bits(rng.u64(..))),
            _ => rng.u32(..100_000).to_string(),
        }
    }

    fn load(text: &str) -> Result<Config, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).map_err(|e| e.to_string())?;
        Config::load(&path).map_err(|e| e.to_string())
    }

    fn file_with(section: &str, key: &str, value: &str) -> String {
        if section.is_empty() {
            format!("{key} = {value}\n")
        } else {
            format!("[{section}]\n{key} = {value}\n")
        }
    }

    #[test]
    fn every_numeric_key_takes_a_sane_value() {
        for (section, key) in NUMERIC_KEYS {
            let value = match *key {
                "compaction_threshold" => "0.5",
                "temperature" => "1",
                "max_attempts" => "3",
                _ => "1024",
            };
            let text = file_with(section, key, value);
            load(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
    }

    /// Random values (NaN, inf, negative, huge, 0, random bits) into every numeric key: a
    /// clean error naming the key, or a config whose settings can all be built.
    #[test]
    fn random_numbers_never_panic_and_errors_name_the_key() {
        let mut rng = fastrand::Rng::with_seed(0x1414);
        for _ in 0..60 {
            for (section, key) in NUMERIC_KEYS {
                let value = random_number(&mut rng);
                let text = file_with(section, key, &value);
                match load(&text) {
                    Ok(config) => {
                        let _ = config.http_settings();
                        let _ = config.local.settings();
                    }
                    Err(e) => assert!(e.contains(key), "{text}: {e}"),
                }
            }
        }
    }

    #[test]
    fn the_reported_panics_are_errors() {
        for (section, key, value) in [
            ("timeouts", "connect_secs", "1e300"),
            ("timeouts", "idle_secs", "1e300"),
            ("timeouts", "idle_secs", "inf"),
            ("", "temperature", "nan"),
            ("", "max_steps", "0"),
        ] {
            let e = load(&file_with(section, key, value)).unwrap_err();
            assert!(e.contains(key), "{e}");
        }
    }

    #[test]
    fn instruction_names_are_plain_file_names() {
        let config = load("instructions = [\"AGENTS.md\", \"CLAUDE.md\"]\n").unwrap();
        assert_eq!(
            config.instructions,
            Some(vec!["AGENTS.md".to_string(), "CLAUDE.md".to_string()])
        );
        assert_eq!(
            load("instructions = []\n").unwrap().instructions,
            Some(vec![])
        );
        for bad in [
            "../AGENTS.md",
            "/etc/shadow",
            "docs/AGENTS.md",
            "..",
            ".",
            "",
        ] {
            let e = load(&format!("instructions = [{bad:?}]\n")).unwrap_err();
            assert!(e.contains("plain file names"), "{bad}: {e}");
        }
        let many = vec!["\"A.md\""; MAX_INSTRUCTION_NAMES + 1].join(", ");
        let e = load(&format!("instructions = [{many}]\n")).unwrap_err();
        assert!(e.contains("at most"), "{e}");
    }
}

//! `corral init`: finds the model servers running here (Ollama, llama.cpp, LM Studio, vLLM on
//! their usual loopback ports, each recognised by its own API) and the small model
//! `scripts/setup` installs, asks which to use (a numbered choice on a terminal; the best
//! without one or with `--yes`), and writes a commented `config.toml` that names it.
//!
//! The best is a running server's tool-capable model, else the installed gguf, else any other
//! model found. An existing file is never overwritten without `--force`, which keeps it as
//! `config.toml.bak`. The file is written whole (a temp file renamed over) with mode 0600.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::error::{Error, runtime, usage};
use crate::model::ModelSpec;
use crate::model::discover::{self, Found};

#[derive(Debug, Clone, Default)]
pub struct InitArgs {
    /// Where to write; `None`: the default config path.
    pub config: Option<PathBuf>,
    /// Pick the best without asking.
    pub yes: bool,
    /// Replace an existing file (kept as `.bak`).
    pub force: bool,
}

/// One model that can be chosen.
#[derive(Debug, Clone, PartialEq)]
struct Candidate {
    spec: ModelSpec,
    /// The server's address, for `[providers.*]`; `None` for a gguf file.
    base_url: Option<String>,
    /// Known to call tools (a server said so, or the gguf corral serves with its template).
    tools: bool,
}

impl Candidate {
    fn describe(&self) -> String {
        match &self.base_url {
            None => format!(
                "{} (the small model scripts/setup installed; corral starts llama-server for it)",
                self.spec
            ),
            Some(base) => format!(
                "{} at {base}{}",
                self.spec,
                if self.tools {
                    " (calls tools)"
                } else {
                    " (tool calling not known)"
                }
            ),
        }
    }
}

/// The choices, best first: running servers' tool-capable models, the installed gguf, the
/// other models of running servers.
fn candidates(found: &[Found], gguf: Option<ModelSpec>) -> Vec<Candidate> {
    const PER_SERVER: usize = 12;
    let mut with_tools = Vec::new();
    let mut others = Vec::new();
    for server in found {
        for model in server.models.iter().take(PER_SERVER) {
            let tools = server.tool_models.contains(model);
            let candidate = Candidate {
                spec: server.spec(model),
                base_url: Some(server.base_url.clone()),
                tools,
            };
            if tools {
                with_tools.push(candidate);
            } else {
                others.push(candidate);
            }
        }
    }
    with_tools.extend(gguf.map(|spec| Candidate {
        spec,
        base_url: None,
        tools: true,
    }));
    with_tools.extend(others);
    with_tools
}

/// Runs `corral init`: `ask` when a person is at a terminal (and `--yes` was not given).
/// Returns what it says on success; the file's path is in it.
pub async fn init(
    args: InitArgs,
    ask: bool,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let path = args
        .config
        .clone()
        .or_else(Config::default_path)
        .ok_or_else(|| {
            usage("no config directory: set XDG_CONFIG_HOME or HOME, or pass --config")
        })?;
    if path.exists() && !args.force {
        return Err(usage(format!(
            "{} exists; corral init does not overwrite it. Pass --force to replace it (the old \
             file is kept as {}), or --config PATH to write elsewhere",
            path.display(),
            backup_path(&path).display()
        )));
    }
    let var = |name: &str| std::env::var(name).ok();
    let found = discover::probe_all(&discover::local_candidates(&var)).await;
    let gguf = discover::embedded_model(&var);
    let choices = candidates(&found, gguf);
    let say = |out: &mut dyn Write, line: &str| {
        writeln!(out, "{line}").map_err(|e| runtime(format!("cannot write to stdout: {e}")))
    };
    if choices.is_empty() {
        let setup = discover::embedded_model_path(&var)
            .map(|p| format!(" (it goes to {})", p.display()))
            .unwrap_or_default();
        return Err(runtime(format!(
            "no model found: no model server answers on 127.0.0.1 (Ollama 11434, llama.cpp \
             8080, LM Studio 1234, vLLM 8000) and the small model is not installed{setup}. Run \
             scripts/setup, or start a server (`ollama serve`, then `ollama pull qwen3`), then \
             run corral init again"
        )));
    }
    let chosen = if ask && choices.len() > 1 {
        say(out, "Models found:")?;
        for (i, choice) in choices.iter().enumerate() {
            say(
                out,
                &format!(
                    "  {}. {}",
                    i + 1,
                    crate::surface::safe_text::escape_line(&choice.describe())
                ),
            )?;
        }
        ask_number(input, out, choices.len())?
    } else {
        0
    };
    let choice = &choices[chosen];
    let text = config_text(choice, &choices, &found);
    write_config(&path, &text, args.force)?;
    say(
        out,
        &crate::surface::safe_text::escape_line(&format!(
            "wrote {}: model = {}{}",
            path.display(),
            choice.spec,
            if choice.base_url.is_none() {
                format!(". {}", discover::EMBEDDED_MODEL_LIMITS)
            } else {
                String::new()
            }
        )),
    )?;
    Ok(())
}

/// The number a person typed (1-based; empty: 1), asked again on nonsense, three times.
fn ask_number(input: &mut dyn BufRead, out: &mut dyn Write, count: usize) -> Result<usize, Error> {
    let io = |e: std::io::Error| runtime(format!("cannot ask at the terminal: {e}"));
    for _ in 0..3 {
        write!(out, "Use which? [1-{count}, Enter: 1] ").map_err(io)?;
        out.flush().map_err(io)?;
        let mut line = String::new();
        if input.read_line(&mut line).map_err(io)? == 0 {
            return Err(usage("no answer (end of input); nothing written"));
        }
        let line = line.trim();
        if line.is_empty() {
            return Ok(0);
        }
        match line.parse::<usize>() {
            Ok(n) if (1..=count).contains(&n) => return Ok(n - 1),
            _ => writeln!(out, "  {line:?} is not a number from 1 to {count}").map_err(io)?,
        }
    }
    Err(usage("no valid choice; nothing written"))
}

fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".bak");
    PathBuf::from(name)
}

/// A TOML basic string: quotes, backslashes and control characters escaped.
fn toml_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04X}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// The file: the chosen model, the others commented out, each server's address, and the
/// settings a newcomer most often changes, commented with their defaults.
fn config_text(choice: &Candidate, all: &[Candidate], found: &[Found]) -> String {
    let mut text = String::from(
        "# corral's configuration, written by `corral init`. Every key is optional; flags win\n\
         # over this file (README: \"Configuration\"). `corral doctor` checks what it names.\n\n",
    );
    text.push_str("# The model sessions use when -m names none.\n");
    if choice.base_url.is_none() {
        text.push_str(&format!("# {}\n", discover::EMBEDDED_MODEL_LIMITS));
    }
    text.push_str(&format!(
        "model = {}\n",
        toml_string(&choice.spec.to_string())
    ));
    let others: Vec<&Candidate> = all.iter().filter(|c| *c != choice).collect();
    if !others.is_empty() {
        text.push_str("\n# Other models found here; put one in place of the line above:\n");
        for other in others {
            text.push_str(&format!(
                "# model = {}\n",
                toml_string(&other.spec.to_string())
            ));
        }
    }
    text.push_str(
        "\n# Small models call tools reliably only when made to on a turn's first step; gguf\n\
         # models get this unless set here (auto | required | none | first-required):\n\
         # tool_choice = \"first-required\"\n\
         \n\
         # permission = \"default\"    # preset: default, readonly, auto, specialist, bypass\n\
         # sandbox = \"best-effort\"   # shell/python confinement: strict | best-effort | off\n",
    );
    if choice.base_url.is_none() {
        text.push_str(
            "\n[local]                       # the llama-server corral starts for gguf: models\n\
             # context_size = 8192\n\
             # startup_timeout_secs = 120\n",
        );
    }
    for server in found {
        text.push_str(&format!(
            "\n[providers.{}]\nbase_url = {}\n",
            server.provider.prefix(),
            toml_string(&server.base_url)
        ));
    }
    text
}

/// Writes `text` to `path` whole, mode 0600; with `force` an existing file is first copied to
/// `path.bak` (also 0600: it may hold secrets).
fn write_config(path: &Path, text: &str, force: bool) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let failed = |what: &str, e: std::io::Error| runtime(format!("cannot {what}: {e}"));
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| failed(&format!("create {}", dir.display()), e))?;
    if force && path.exists() {
        let backup = backup_path(path);
        std::fs::copy(path, &backup)
            .and_then(|_| std::fs::set_permissions(&backup, std::fs::Permissions::from_mode(0o600)))
            .map_err(|e| failed(&format!("keep the old file as {}", backup.display()), e))?;
    }
    let mut temp = tempfile::Builder::new()
        .prefix(".config.toml.")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(|e| failed(&format!("write in {}", dir.display()), e))?;
    temp.write_all(text.as_bytes())
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|e| failed("write the config", e))?;
    // Without --force a file that appeared since the check is not replaced either.
    let persisted = if force {
        temp.persist(path)
    } else {
        temp.persist_noclobber(path)
    };
    persisted.map_err(|e| failed(&format!("write {}", path.display()), e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Provider;

    fn found(provider: Provider, models: &[&str], tool_model: Option<&str>) -> Found {
        Found {
            provider,
            base_url: format!("http://127.0.0.1:1/{}", provider.prefix()),
            models: models.iter().map(|m| (*m).to_string()).collect(),
            tool_models: tool_model.into_iter().map(str::to_string).collect(),
        }
    }

    #[test]
    fn a_tool_model_comes_first_then_the_gguf_then_the_rest() {
        let gguf = ModelSpec::new(Provider::Gguf, "/m.gguf");
        let servers = [
            found(Provider::Vllm, &["big"], None),
            found(Provider::Ollama, &["chatty", "qwen3:8b"], Some("qwen3:8b")),
        ];
        let order: Vec<String> = candidates(&servers, Some(gguf))
            .iter()
            .map(|c| c.spec.to_string())
            .collect();
        assert_eq!(
            order,
            [
                "ollama:qwen3:8b",
                "gguf:/m.gguf",
                "vllm:big",
                "ollama:chatty"
            ]
        );
    }

    #[test]
    fn the_written_text_loads_as_a_config_and_names_the_choice() {
        let servers = [found(Provider::Ollama, &["q\"uo\\te"], Some("q\"uo\\te"))];
        let gguf = ModelSpec::new(Provider::Gguf, "/data/m.gguf");
        let all = candidates(&servers, Some(gguf));
        for choice in &all {
            let text = config_text(choice, &all, &servers);
            let config: Config = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let Some(crate::model::ModelChoice::Native(spec)) = config.model.clone() else {
                panic!("not native");
            };
            assert_eq!(spec, choice.spec);
            assert_eq!(
                config.provider(Provider::Ollama).base_url.as_deref(),
                Some("http://127.0.0.1:1/ollama")
            );
        }
    }

    #[test]
    fn a_number_is_asked_until_it_is_one_of_the_choices() {
        let mut out = Vec::new();
        let mut input: &[u8] = b"7\nx\n2\n";
        assert_eq!(ask_number(&mut input, &mut out, 3).unwrap(), 1);
        let said = String::from_utf8(out).unwrap();
        assert!(said.contains("\"7\" is not a number from 1 to 3"), "{said}");
        let mut input: &[u8] = b"\n";
        assert_eq!(ask_number(&mut input, &mut Vec::new(), 3).unwrap(), 0);
        let mut input: &[u8] = b"";
        assert!(ask_number(&mut input, &mut Vec::new(), 3).is_err());
    }
}

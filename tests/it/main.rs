//! Integration tests: the `corral` binary driven against real sockets and processes.

// Helpers outside #[test] functions are test code too: failing loudly is their job.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod acp;
mod common;
mod desktop;
mod edit_tools;
mod eval;
mod exec_tools;
mod external_acp;
mod external_claude;
mod external_codex;
mod file_tools;
mod gate;
mod gate_attacks;
mod git_attacks;
mod hostile_faults;
mod instructions;
mod layers;
mod log_faults;
mod mcp;
mod mcp_client;
mod plan;
mod process_attacks;
mod prompt_images;
mod resume_faults;
mod run_cli;
mod run_loop;
mod run_ollama;
mod run_openai;
mod run_recover;
mod safe_output;
mod sandbox;
mod sandbox_attacks;
mod sandbox_confine;
mod sandbox_powers;
mod server_attacks;
mod server_cli;
mod server_rest;
mod server_ws;
mod shutdown_faults;
mod support;
mod terminal;
mod web_page;
mod worktree;
mod ws_faults;

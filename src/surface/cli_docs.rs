//! `corral completions SHELL` and `corral man`: both generated from the command line's one
//! clap definition, which `main.rs` hands in, so they never drift from the flags.

use std::io::{self, Write};

/// The completion script for `shell`, for the command `cmd` (whose name is the binary's).
pub fn write_completions(
    shell: clap_complete::Shell,
    mut cmd: clap::Command,
    out: &mut dyn Write,
) -> io::Result<()> {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, out);
    out.flush()
}

/// One roff page for `cmd` and every visible subcommand (`man -l` reads it; install it as
/// `~/.local/share/man/man1/corral.1`). The page begins with its `.TH` title; each
/// subcommand follows as a section of its own (`.SH "CORRAL RUN"`), its parts as
/// subsections, rather than as pages of their own, so one file documents everything.
pub fn write_man_page(cmd: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let mut cmd = cmd.disable_help_subcommand(true);
    let name = cmd.get_name().to_string();
    cmd.set_bin_name(&name);
    cmd.build();
    let main = render(&cmd)?;
    // The title first, then roff's preamble (an apostrophe string), then the page.
    let (title, rest): (Vec<&str>, Vec<&str>) = main.lines().partition(|l| l.starts_with(".TH "));
    let mut page = String::new();
    for line in title.into_iter().chain(rest) {
        page.push_str(line);
        page.push('\n');
    }
    for sub in visible_subcommands(&cmd) {
        let heading = sub
            .get_bin_name()
            .unwrap_or_else(|| sub.get_name())
            .to_uppercase();
        let mut roff = clap_mangen::roff::Roff::default();
        roff.control("SH", [heading.as_str()]);
        page.push_str(&body(&roff.render()));
        page.push_str(&body(&render(sub)?).replace("\n.SH ", "\n.SS "));
    }
    out.write_all(page.as_bytes())?;
    out.flush()
}

fn render(cmd: &clap::Command) -> io::Result<String> {
    let mut text = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut text)?;
    String::from_utf8(text).map_err(io::Error::other)
}

/// A rendered page without its title and preamble (`.ie`/`.el` defining `Aq`), which the
/// one page has once; always starts at a line's start.
fn body(text: &str) -> String {
    let mut out = String::from("\n");
    for line in text.lines() {
        let skip = line.starts_with(".TH ")
            || line.starts_with(".ie \\n(.g .ds Aq")
            || line.starts_with(".el .ds Aq");
        if !skip {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Every subcommand not hidden, depth first (`worktree`, then `worktree list` …).
fn visible_subcommands(cmd: &clap::Command) -> Vec<&clap::Command> {
    let mut all = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        all.push(sub);
        all.extend(visible_subcommands(sub));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> clap::Command {
        clap::Command::new("corral")
            .version("1.0")
            .about("an agent runtime")
            .subcommand(
                clap::Command::new("logs")
                    .about("print a log")
                    .arg(clap::Arg::new("id").required(true))
                    .arg(
                        clap::Arg::new("follow")
                            .long("follow")
                            .action(clap::ArgAction::SetTrue),
                    ),
            )
            .subcommand(
                clap::Command::new("worktree")
                    .about("worktrees")
                    .subcommand(clap::Command::new("list").about("list them")),
            )
            .subcommand(clap::Command::new("__secret").hide(true))
    }

    #[test]
    fn one_page_holds_every_visible_subcommand_after_its_title() {
        let mut out = Vec::new();
        write_man_page(cli(), &mut out).unwrap();
        let page = String::from_utf8(out).unwrap();
        assert!(page.starts_with(".TH corral 1"), "{page}");
        assert_eq!(page.matches(".TH ").count(), 1, "{page}");
        assert_eq!(
            page.matches(".ds Aq").count(),
            2,
            "one .ie/.el pair: {page}"
        );
        assert!(page.contains(".SH \"CORRAL LOGS\""), "{page}");
        assert!(page.contains(".SH \"CORRAL WORKTREE LIST\""), "{page}");
        assert!(page.contains("\\-\\-follow"), "{page}");
        assert!(page.contains(".SS SYNOPSIS"), "{page}");
        assert!(!page.contains("__secret"), "{page}");
    }

    #[test]
    fn completions_name_the_subcommands() {
        let mut out = Vec::new();
        write_completions(clap_complete::Shell::Bash, cli(), &mut out).unwrap();
        let script = String::from_utf8(out).unwrap();
        assert!(script.contains("complete -F _corral"), "{script}");
        assert!(script.contains("logs"), "{script}");
    }
}

//! `corral sessions`: the sessions in this machine's agents directory, newest activity
//! first, as a table for a person or (`--json`) one JSON array for a program. Titles, models
//! and directories come from logs and metadata a model influenced, so every cell is escaped,
//! and the JSON carries `\uXXXX` for what a terminal would act on.

use std::io::{self, Write};

use time::OffsetDateTime;

use super::run::Exit;
use super::safe_text::{escape, escape_head, escape_json, escape_line};
use crate::session::catalog::{self, LocalSession};

/// The widest a title or model is shown in the table (the JSON has them whole).
const TITLE_WIDTH: usize = 40;
const MODEL_WIDTH: usize = 28;

/// Lists the sessions on `out`; errors on `err`. Returns the exit code.
pub fn sessions_main(json: bool, out: &mut impl Write, err: &mut impl Write) -> Exit {
    let listed = crate::host::open::agents_dir().and_then(|dir| {
        catalog::list(&dir)
            .map(|sessions| (dir.clone(), sessions))
            .map_err(|e| {
                crate::error::runtime(format!(
                    "cannot read the sessions in {}: {e}",
                    dir.display()
                ))
            })
    });
    let (dir, sessions) = match listed {
        Ok(listed) => listed,
        Err(e) => {
            let _ = writeln!(err, "corral: {}", escape(&e.to_string()));
            return e.exit();
        }
    };
    let written = if json {
        let raw = serde_json::to_string(&sessions).map_err(io::Error::other);
        raw.and_then(|raw| writeln!(out, "{}", escape_json(&raw)))
    } else if sessions.is_empty() {
        writeln!(
            out,
            "No sessions in {} yet. Start one with `corral run \"your task\"` (or `corral serve`).",
            escape_line(&dir.display().to_string())
        )
    } else {
        out.write_all(table(&sessions, OffsetDateTime::now_utc()).as_bytes())
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => Exit::Ok,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Exit::Ok,
        Err(e) => {
            let _ = writeln!(err, "corral: cannot write the listing: {e}");
            Exit::Failure
        }
    }
}

/// One row a session, columns as wide as their widest cell, every cell escaped.
fn table(sessions: &[LocalSession], now: OffsetDateTime) -> String {
    let home = dirs::home_dir().map(|h| h.display().to_string());
    let header = [
        "ID",
        "TITLE",
        "MODEL",
        "STATUS",
        "TURNS",
        "TOKENS",
        "ACTIVE",
        "DIRECTORY",
    ]
    .map(String::from);
    let rows: Vec<[String; 8]> = sessions
        .iter()
        .map(|s| {
            let dir = s.worktree.as_deref().or(s.cwd.as_deref()).unwrap_or("-");
            [
                escape_line(&s.id),
                escape_head(&s.title, TITLE_WIDTH),
                escape_head(&short_model(s.model.as_deref().unwrap_or("-")), MODEL_WIDTH),
                s.status.as_str().to_string(),
                s.turns.to_string(),
                tokens(s.usage.input_tokens.saturating_add(s.usage.output_tokens)),
                s.last_activity
                    .map(|t| age(now - t.0))
                    .unwrap_or_else(|| "-".into()),
                escape_line(&shorten_home(dir, home.as_deref())),
            ]
        })
        .collect();
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            // Numbers right-aligned, the last column unpadded.
            let pad = width.saturating_sub(cell.chars().count());
            match i {
                4 | 5 => line.extend(std::iter::repeat_n(' ', pad).chain(cell.chars())),
                7 => line.push_str(cell),
                _ => line.extend(cell.chars().chain(std::iter::repeat_n(' ', pad))),
            }
            if i < 7 {
                line.push_str("  ");
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// A `gguf:` model by its file's name: the directory is the same long path for all of them.
pub(crate) fn short_model(model: &str) -> String {
    match model
        .strip_prefix("gguf:")
        .and_then(|path| path.rsplit_once('/'))
    {
        Some((_, file)) => format!("gguf:{file}"),
        None => model.to_string(),
    }
}

fn shorten_home(dir: &str, home: Option<&str>) -> String {
    match home.and_then(|h| dir.strip_prefix(h)) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("~{rest}"),
        _ => dir.to_string(),
    }
}

/// `950`, `12.3k`, `4.5M`.
pub(crate) fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// How long ago, in the largest whole unit: `12s ago`, `3m ago`, `5h ago`, `4d ago`.
pub(crate) fn age(elapsed: time::Duration) -> String {
    let secs = elapsed.whole_seconds().max(0);
    match secs {
        0..60 => format!("{secs}s ago"),
        60..3_600 => format!("{}m ago", secs / 60),
        3_600..86_400 => format!("{}h ago", secs / 3_600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Timestamp;
    use crate::session::catalog::LocalStatus;

    fn session(id: &str, title: &str) -> LocalSession {
        LocalSession {
            id: id.into(),
            title: title.into(),
            model: Some("llamacpp:qwen".into()),
            backend: Some("native"),
            cwd: Some("/src/app".into()),
            worktree: None,
            owner: None,
            parent: None,
            created_at: None,
            last_activity: Some(Timestamp(time::macros::datetime!(2026-12-01 12:00 UTC))),
            status: LocalStatus::Dead,
            turns: 3,
            usage: crate::event::Usage {
                input_tokens: 1200,
                output_tokens: 100,
                ..Default::default()
            },
            events: 10,
            unreadable_lines: 0,
            event_log: "/x".into(),
        }
    }

    #[test]
    fn the_table_aligns_its_columns_and_escapes_every_cell() {
        let now = time::macros::datetime!(2026-12-01 12:03:30 UTC);
        let mut hostile = session("b2", "\x1b]52;c;aGk=\x07 \x1b[2J\u{202e}title");
        hostile.model = Some("m\x1b[31m".into());
        hostile.last_activity = None;
        hostile.status = LocalStatus::Working;
        let text = table(&[session("a1", "fix the tests"), hostile], now);
        assert!(
            !text.contains('\x1b') && !text.contains('\u{202e}'),
            "{text}"
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("ID  TITLE "), "{text}");
        assert!(lines[1].contains("fix the tests"), "{text}");
        assert!(lines[1].contains("  dead  "), "{text}");
        assert!(lines[1].contains("1.3k  3m ago  /src/app"), "{text}");
        assert!(
            lines[2].contains(r"\x1b]52;c;aGk=\x07 \x1b[2J\u{202e}title"),
            "{text}"
        );
        assert!(lines[2].contains(r"m\x1b[31m"), "{text}");
        // Columns line up: STATUS starts at one place in every row.
        let at = lines[0].find("STATUS").unwrap();
        assert_eq!(lines[1].get(at..at + 4), Some("dead"), "{text}");
        assert_eq!(lines[2].get(at..at + 7), Some("working"), "{text}");
    }

    #[test]
    fn ages_tokens_and_home_read_short() {
        assert_eq!(age(time::Duration::seconds(12)), "12s ago");
        assert_eq!(age(time::Duration::seconds(-5)), "0s ago");
        assert_eq!(age(time::Duration::minutes(3)), "3m ago");
        assert_eq!(age(time::Duration::hours(5)), "5h ago");
        assert_eq!(age(time::Duration::days(4)), "4d ago");
        assert_eq!(tokens(950), "950");
        assert_eq!(tokens(12_345), "12.3k");
        assert_eq!(tokens(4_500_000), "4.5M");
        assert_eq!(short_model("gguf:/m/dir/q.gguf"), "gguf:q.gguf");
        assert_eq!(short_model("ollama:qwen3:8b"), "ollama:qwen3:8b");
        assert_eq!(shorten_home("/home/a/src", Some("/home/a")), "~/src");
        assert_eq!(shorten_home("/home/ab", Some("/home/a")), "/home/ab");
    }
}

//! The colours of the terminal UI, in one place. `NO_COLOR` gets a theme of modifiers only
//! (bold, dim, italic, reverse), which every terminal draws.

use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone)]
pub struct Theme {
    pub text: Style,
    pub dim: Style,
    pub user: Style,
    pub heading: Style,
    pub inline_code: Style,
    pub link: Style,
    pub keyword: Style,
    pub string: Style,
    pub comment: Style,
    pub number: Style,
    pub added: Style,
    pub removed: Style,
    pub hunk: Style,
    pub ok: Style,
    pub failed: Style,
    pub running: Style,
    pub error: Style,
    pub warning: Style,
    pub status: Style,
}

impl Theme {
    /// Colours unless `NO_COLOR` is set.
    pub fn from_env() -> Theme {
        if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            Theme::plain()
        } else {
            Theme::colored()
        }
    }

    pub fn colored() -> Theme {
        let fg = |c: Color| Style::new().fg(c);
        Theme {
            text: Style::new(),
            dim: Style::new().add_modifier(Modifier::DIM),
            user: fg(Color::Cyan).add_modifier(Modifier::BOLD),
            heading: fg(Color::Magenta).add_modifier(Modifier::BOLD),
            inline_code: fg(Color::Yellow),
            link: fg(Color::Blue).add_modifier(Modifier::UNDERLINED),
            keyword: fg(Color::Magenta),
            string: fg(Color::Green),
            comment: Style::new().add_modifier(Modifier::DIM | Modifier::ITALIC),
            number: fg(Color::Cyan),
            added: fg(Color::Green),
            removed: fg(Color::Red),
            hunk: fg(Color::Cyan),
            ok: fg(Color::Green),
            failed: fg(Color::Red).add_modifier(Modifier::BOLD),
            running: fg(Color::Yellow),
            error: fg(Color::Red).add_modifier(Modifier::BOLD),
            warning: fg(Color::Yellow).add_modifier(Modifier::BOLD),
            status: Style::new().bg(Color::DarkGray).fg(Color::White),
        }
    }

    pub fn plain() -> Theme {
        let none = Style::new();
        Theme {
            text: none,
            dim: Style::new().add_modifier(Modifier::DIM),
            user: Style::new().add_modifier(Modifier::BOLD),
            heading: Style::new().add_modifier(Modifier::BOLD),
            inline_code: none,
            link: Style::new().add_modifier(Modifier::UNDERLINED),
            keyword: Style::new().add_modifier(Modifier::BOLD),
            string: none,
            comment: Style::new().add_modifier(Modifier::ITALIC),
            number: none,
            added: none,
            removed: none,
            hunk: Style::new().add_modifier(Modifier::BOLD),
            ok: none,
            failed: Style::new().add_modifier(Modifier::BOLD),
            running: none,
            error: Style::new().add_modifier(Modifier::BOLD),
            warning: Style::new().add_modifier(Modifier::BOLD),
            status: Style::new().add_modifier(Modifier::REVERSED),
        }
    }
}

impl Theme {
    /// The style of one line of a unified diff (or of text holding one).
    pub fn diff_line(&self, line: &str) -> Style {
        if line.starts_with("+++") || line.starts_with("---") {
            self.heading
        } else if line.starts_with('+') {
            self.added
        } else if line.starts_with('-') {
            self.removed
        } else if line.starts_with("@@") {
            self.hunk
        } else {
            self.text
        }
    }
}

//! Where `old_text` is in a file. Exact first; when that finds nothing, tolerant passes in a
//! fixed order, each looser than the one before, and each of which must find exactly one
//! place (or, with `replace_all`, at least one):
//!
//! 1. exact, as a substring;
//! 2. line endings: `old_text` with the file's (CRLF ↔ LF);
//! 3. trailing whitespace ignored, line by line (whole lines from here on);
//! 4. indentation shifted uniformly: every line of `old_text` indented by the same amount
//!    more (or less) than the file's; `new_text` is re-indented by that amount;
//! 5. passes 1–4 again with line-number prefixes (read_file's and `cat -n`'s) taken off
//!    `old_text` and `new_text`, when every line carries one;
//! 6. typographic quotes, dashes and odd spaces taken as their plain ASCII forms.
//!
//! A pass that finds several places stops the search with an error naming them: a looser
//! pass could only find more, and picking one would be a guess. `new_text` always takes the
//! file's line endings.

use similar::TextDiff;

use super::lines::Lines;
use super::numbers;

/// Files longer than this get no "closest lines" hint (it compares every line).
const MAX_HINT_LINES: usize = 20_000;
/// Places shown with context in an error.
const SHOWN: usize = 3;

/// The pass that found the place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    Exact,
    LineEndings,
    TrailingWhitespace,
    Indentation,
    Typography,
}

impl Pass {
    pub(crate) fn how(self) -> &'static str {
        match self {
            Pass::Exact => "exactly",
            Pass::LineEndings => "with the file's line endings",
            Pass::TrailingWhitespace => "ignoring trailing whitespace",
            Pass::Indentation => "with its indentation shifted",
            Pass::Typography => "taking typographic quotes and dashes as plain ones",
        }
    }
}

/// The order passes are tried in; `true`: on the texts with line numbers taken off.
const ORDER: [(Pass, bool); 10] = [
    (Pass::Exact, false),
    (Pass::LineEndings, false),
    (Pass::TrailingWhitespace, false),
    (Pass::Indentation, false),
    (Pass::Exact, true),
    (Pass::LineEndings, true),
    (Pass::TrailingWhitespace, true),
    (Pass::Indentation, true),
    (Pass::Typography, false),
    (Pass::Typography, true),
];

/// A replacement made.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Replaced {
    pub(crate) text: String,
    pub(crate) count: usize,
    pub(crate) pass: Pass,
    /// Line-number prefixes were taken off old_text and new_text.
    pub(crate) unnumbered: bool,
}

/// A byte range of the file and what replaces it.
struct Spot {
    start: usize,
    end: usize,
    with: String,
}

enum Outcome {
    Found(Vec<Spot>),
    /// 0-based first lines of every place found.
    Several(Vec<usize>),
    Nothing,
}

/// Replaces `old` by `new` in `text` (one place, or every place with `all`). Err: why not,
/// for the model, with the candidate lines.
pub(crate) fn replace(text: &str, old: &str, new: &str, all: bool) -> Result<Replaced, String> {
    if old.is_empty() {
        return Err(
            "old_text is empty: give the text to replace (to write a whole file, use \
                    write_file)"
                .into(),
        );
    }
    if old == new {
        return Err("old_text and new_text are the same; nothing would change".into());
    }
    let lines = Lines::new(text);
    // Only looked at once the texts as given matched nothing: a file may hold such lines.
    let mut unnumbered: Option<Option<(String, String)>> = None;
    for (pass, strip) in ORDER {
        let (old, new) = match strip {
            false => (old, new),
            true => {
                if unnumbered.is_none() {
                    unnumbered = Some(without_numbers(old, new)?);
                }
                match unnumbered.as_ref().and_then(Option::as_ref) {
                    Some((old, new)) => (old.as_str(), new.as_str()),
                    None => continue,
                }
            }
        };
        if old == new {
            return Err(
                "without their line numbers old_text and new_text are the same; \
                        nothing would change"
                    .into(),
            );
        }
        let new = lines.with_line_endings(new);
        match find(pass, &lines, old, &new, all) {
            Outcome::Found(spots) => {
                return Ok(Replaced {
                    count: spots.len(),
                    text: splice(text, spots),
                    pass,
                    unnumbered: strip,
                });
            }
            Outcome::Several(firsts) => return Err(several(&lines, pass, &firsts, old)),
            Outcome::Nothing => {}
        }
    }
    let first = match &unnumbered {
        Some(Some((old, _))) => old.as_str(),
        _ => old,
    };
    Err(not_found(&lines, first))
}

/// old_text and new_text without line-number prefixes, when old_text has them. new_text
/// loses them only if every line has one; some but not all is a mistake to report.
fn without_numbers(old: &str, new: &str) -> Result<Option<(String, String)>, String> {
    let Some(old) = numbers::strip(old) else {
        return Ok(None);
    };
    let new = match numbers::strip(new) {
        Some(new) => new,
        None if numbers::any_numbered(new) => {
            return Err(
                "new_text has line-number prefixes on some lines but not all; write \
                        new_text without them"
                    .into(),
            );
        }
        None => new.to_owned(),
    };
    Ok(Some((old, new)))
}

fn find(pass: Pass, lines: &Lines, old: &str, new: &str, all: bool) -> Outcome {
    match pass {
        Pass::Exact => find_exact(lines, old, new, all),
        Pass::LineEndings => {
            let adapted = lines.with_line_endings(old);
            if adapted == old {
                return Outcome::Nothing;
            }
            find_exact(lines, &adapted, new, all)
        }
        Pass::TrailingWhitespace | Pass::Indentation | Pass::Typography => {
            find_lines(pass, lines, old, new, all)
        }
    }
}

fn find_exact(lines: &Lines, old: &str, new: &str, all: bool) -> Outcome {
    let text = lines.text;
    if all {
        let spots: Vec<Spot> = text
            .match_indices(old)
            .map(|(start, _)| Spot {
                start,
                end: start + old.len(),
                with: new.to_owned(),
            })
            .collect();
        return found_or_nothing(spots);
    }
    // Overlapping occurrences count: "aa" is in "aaa" twice.
    let mut starts = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(old) {
        starts.push(from + at);
        let step = text[from + at..].chars().next().map_or(1, char::len_utf8);
        from += at + step;
    }
    match starts.as_slice() {
        [] => Outcome::Nothing,
        [start] => Outcome::Found(vec![Spot {
            start: *start,
            end: start + old.len(),
            with: new.to_owned(),
        }]),
        _ => Outcome::Several(starts.iter().map(|&s| lines.line_of(s)).collect()),
    }
}

fn found_or_nothing(spots: Vec<Spot>) -> Outcome {
    if spots.is_empty() {
        Outcome::Nothing
    } else {
        Outcome::Found(spots)
    }
}

/// How old_text's indentation differs from the file's, the same on every line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Shift {
    /// The file has this much more in front of every line.
    Add(String),
    /// The file has this much less.
    Remove(String),
}

fn find_lines(pass: Pass, lines: &Lines, old: &str, new: &str, all: bool) -> Outcome {
    // A final line break in old_text means its last line is whole, break included.
    let (body, whole) = match old.strip_suffix('\n') {
        Some(body) => (body.strip_suffix('\r').unwrap_or(body), true),
        None => (old, false),
    };
    let wanted: Vec<&str> = body
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let n = wanted.len();
    let mut places: Vec<(usize, Option<Shift>)> = Vec::new();
    for first in 0..(lines.len() + 1).saturating_sub(n) {
        let window = (first..first + n).map(|i| lines.line(i));
        let matched = match pass {
            Pass::Indentation => shift_between(window, &wanted).map(Some),
            Pass::Typography => window
                .zip(&wanted)
                .all(|(have, want)| plain(have.trim_end()) == plain(want.trim_end()))
                .then_some(None),
            _ => window
                .zip(&wanted)
                .all(|(have, want)| have.trim_end() == want.trim_end())
                .then_some(None),
        };
        if let Some(shift) = matched {
            places.push((first, shift));
        }
    }
    if all {
        let mut taken: Vec<(usize, Option<Shift>)> = Vec::new();
        for place in places {
            if taken.last().is_none_or(|(first, _)| place.0 >= first + n) {
                taken.push(place);
            }
        }
        places = taken;
    } else if places.len() > 1 {
        return Outcome::Several(places.iter().map(|(first, _)| *first).collect());
    }
    let spots = places
        .into_iter()
        .map(|(first, shift)| {
            let last = first + n - 1;
            let end = if whole {
                lines.full_end(last)
            } else {
                lines.content_end(last)
            };
            let mut with = match &shift {
                Some(shift) => reindent(new, shift),
                None => new.to_owned(),
            };
            // old_text's final break stood for one the file's last line does not have.
            if whole && !lines.has_break(last) && with.ends_with('\n') {
                with.pop();
                if with.ends_with('\r') {
                    with.pop();
                }
            }
            Spot {
                start: lines.start(first),
                end,
                with,
            }
        })
        .collect();
    found_or_nothing(spots)
}

/// The one indentation shift that makes every line of `window` the line of `wanted` (trailing
/// whitespace ignored, empty lines matching empty lines); `None` when there is none or it is
/// no shift at all.
fn shift_between<'a>(window: impl Iterator<Item = &'a str>, wanted: &[&str]) -> Option<Shift> {
    let mut shift: Option<Shift> = None;
    for (have, want) in window.zip(wanted) {
        let (have, want) = (have.trim_end(), want.trim_end());
        if have.is_empty() || want.is_empty() {
            if have.is_empty() != want.is_empty() {
                return None;
            }
            continue;
        }
        let (have_body, want_body) = (have.trim_start(), want.trim_start());
        if have_body != want_body {
            return None;
        }
        let have_lead = &have[..have.len() - have_body.len()];
        let want_lead = &want[..want.len() - want_body.len()];
        let this = if let Some(extra) = have_lead.strip_suffix(want_lead) {
            Shift::Add(extra.to_owned())
        } else if let Some(extra) = want_lead.strip_suffix(have_lead) {
            Shift::Remove(extra.to_owned())
        } else {
            return None;
        };
        match &shift {
            None => shift = Some(this),
            Some(known) if *known == this => {}
            Some(_) => return None,
        }
    }
    shift.filter(|s| !matches!(s, Shift::Add(d) | Shift::Remove(d) if d.is_empty()))
}

fn reindent(text: &str, shift: &Shift) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            if line.trim().is_empty() {
                return line.to_owned();
            }
            match shift {
                Shift::Add(extra) => format!("{extra}{line}"),
                Shift::Remove(extra) => line
                    .strip_prefix(extra.as_str())
                    .unwrap_or_else(|| line.trim_start())
                    .to_owned(),
            }
        })
        .collect()
}

/// Typographic characters as the plain ones a model types.
pub(super) fn plain(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' => '"',
            '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

fn splice(text: &str, mut spots: Vec<Spot>) -> String {
    spots.sort_by_key(|s| s.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for spot in spots {
        out.push_str(&text[at..spot.start]);
        out.push_str(&spot.with);
        at = spot.end;
    }
    out.push_str(&text[at..]);
    out
}

fn several(lines: &Lines, pass: Pass, firsts: &[usize], old: &str) -> String {
    let numbers: Vec<String> = firsts.iter().map(|f| (f + 1).to_string()).collect();
    let span = old.trim_end_matches('\n').split('\n').count();
    let shown: String = firsts
        .iter()
        .take(SHOWN)
        .map(|&first| lines.context(first, span))
        .collect::<Vec<_>>()
        .join("…\n");
    format!(
        "old_text matches {} places {} (starting at lines {}); nothing was changed. Add \
         surrounding lines to old_text until it matches one place, or set replace_all to \
         change every one:\n{shown}",
        firsts.len(),
        pass.how(),
        numbers.join(", ")
    )
}

fn not_found(lines: &Lines, old: &str) -> String {
    let tried = "exactly, with the file's line endings, ignoring trailing whitespace, with its \
                 indentation shifted, without line-number prefixes, and taking typographic \
                 quotes and dashes as plain ones";
    let mut message = format!("old_text was not found (compared {tried}); nothing was changed.");
    let span = old.trim_end_matches('\n').split('\n').count();
    let closest = closest_lines(lines, old);
    if closest.is_empty() {
        message.push_str(" Read the file again and copy old_text from it as it is now.");
    } else {
        let numbers: Vec<String> = closest.iter().map(|l| (l + 1).to_string()).collect();
        message.push_str(&format!(
            " The lines most like its first line are at {}:\n",
            numbers.join(", ")
        ));
        let shown: Vec<String> = closest.iter().map(|&l| lines.context(l, span)).collect();
        message.push_str(&shown.join("…\n"));
    }
    message
}

/// Lines that look most like old_text's first non-blank line, best few, in file order.
fn closest_lines(lines: &Lines, old: &str) -> Vec<usize> {
    let Some(first) = old.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return Vec::new();
    };
    if lines.len() > MAX_HINT_LINES {
        return Vec::new();
    }
    let mut scored: Vec<(f32, usize)> = (0..lines.len())
        .filter_map(|i| {
            let line = lines.line(i).trim();
            if line.is_empty() {
                return None;
            }
            let ratio = TextDiff::from_chars(first, line).ratio();
            (ratio >= 0.5).then_some((ratio, i))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut best: Vec<usize> = scored.into_iter().take(SHOWN).map(|(_, i)| i).collect();
    best.sort_unstable();
    best
}

#[cfg(test)]
#[path = "matching_tests.rs"]
mod tests;

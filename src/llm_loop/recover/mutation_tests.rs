//! The fuzz targets' check on stable Rust, deterministic and cheap: every parser gets a few
//! thousand replies built from seeds of every family and context lines (prose, fences,
//! quotes), then mutated (markers and punctuation spliced in, characters cut, repeated and
//! replaced). None may panic, and every call one returns must name a tool
//! its catalog accepts with those arguments (`fuzz_recover` checks that).

use super::{FAMILIES, fuzz_recover};

const SEEDS: &[&str] = &[
    "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>",
    "<tool_call>{\"name\": \"shell\", \"arguments\": \"{\\\"command\\\": \\\"ls\\\"}\"}</tool_call>",
    "<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call>",
    "<tool_call>\n<function=read_file>\n<parameter=path>\na.txt\n</parameter>\n\
     <parameter=startLine>\n2\n</parameter>\n</function>\n</tool_call>",
    "<function=write_file>\n<parameter=path>\nb\n</parameter>\n<parameter=content>\nx\n\
     </parameter>\n</function>",
    "<function=rm>\n<parameter=path>\n/\n</parameter>\n</function>",
    "{\"name\": \"list_directory\", \"arguments\": {\"path\": \".\"}}",
    "```json\n{\"name\": \"read_file\", \"parameters\": {\"path\": \"a\"}}\n```",
    "{\"name\": \"rm\", \"arguments\": {\"path\": \"/\"}}",
    "[TOOL_CALLS] [{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}]",
    "[TOOL_CALLS]read_file[ARGS]{\"path\": \"a\"}[TOOL_CALLS]rm[ARGS]{}",
    "<|python_tag|>{\"name\": \"read_file\", \"parameters\": {\"path\": \"a\"}}",
    "<|python_tag|>read_file.call(path=\"a\", startLine=1)",
    "<|python_tag|>rm.call(path=\"/\")",
    "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch",
    "Some prose with `inline` code.\n```\nfenced\n```\n> quoted line\n",
];

const SPLICES: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "<function=read_file>",
    "<parameter=path>",
    "</parameter>",
    "</function>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "<|python_tag|>",
    ".call(",
    "*** Begin Patch",
    "*** End Patch",
    "```",
    "```json\n",
    "~~~",
    "`",
    "> ",
    "\n",
    "\r\n",
    " ",
    "{",
    "}",
    "[",
    "]",
    "\"",
    "\\",
    ",",
    ";",
    ":",
    "=",
    ")",
    "\"name\": \"rm\"",
    "\"arguments\": ",
    "\"parameters\": ",
    "read_file",
    "functions.read_file",
    "apply_patch",
    "null",
    "true",
    "-1e999",
    "é",
    "\u{0}",
    "\u{feff}",
];

/// Lines a reply may hold around calls: prose, fences, quotes, code span openers.
const CONTEXT: &[&str] = &[
    "Sure, reading it now.",
    "```",
    "```json",
    "~~~",
    "> ",
    "`",
    "",
];

/// A reply of one to three parts (seeds and context lines), then up to three mutations.
fn generate(rng: &mut fastrand::Rng) -> String {
    let mut text = String::new();
    for part in 0..rng.usize(1..4) {
        if part > 0 {
            text.push(if rng.bool() { '\n' } else { ' ' });
        }
        text.push_str(if rng.u8(0..3) == 0 {
            CONTEXT[rng.usize(0..CONTEXT.len())]
        } else {
            SEEDS[rng.usize(0..SEEDS.len())]
        });
    }
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..rng.usize(0..4) {
        let at = rng.usize(0..=chars.len());
        match rng.u8(0..4) {
            0 => {
                let splice = SPLICES[rng.usize(0..SPLICES.len())];
                chars.splice(at..at, splice.chars());
            }
            1 if at < chars.len() => {
                let end = (at + rng.usize(1..8)).min(chars.len());
                chars.drain(at..end);
            }
            2 if at < chars.len() => {
                let end = (at + rng.usize(1..16)).min(chars.len());
                let copy: Vec<char> = chars[at..end].to_vec();
                chars.splice(at..at, copy);
            }
            _ => {
                if let Some(c) = chars.get_mut(at) {
                    *c = char::from(rng.u8(0x20..0x7f));
                }
            }
        }
    }
    chars.into_iter().collect()
}

#[test]
fn every_parser_survives_mutated_inputs_and_returns_only_accepted_calls() {
    let mut rng = fastrand::Rng::with_seed(17);
    let parsers: Vec<&str> = FAMILIES.iter().map(|f| f.name).chain(["all"]).collect();
    let mut taken = vec![0usize; parsers.len()];
    for round in 0..4000 {
        let text = match SEEDS.get(round) {
            Some(seed) => (*seed).to_owned(),
            None => generate(&mut rng),
        };
        for (i, parser) in parsers.iter().enumerate() {
            match fuzz_recover(parser, &text) {
                Ok(n) => taken[i] += usize::from(n > 0),
                Err(broken) => panic!("{broken}\ninput: {text:?}"),
            }
        }
    }
    // The inputs reach every parser's accepting paths, so a parser that took a refused call
    // there would have been caught.
    for (parser, count) in parsers.iter().zip(&taken) {
        assert!(*count >= 20, "{parser} took calls from only {count} inputs");
    }
}

#[test]
fn an_unknown_family_is_an_error() {
    assert!(fuzz_recover("nope", "").is_err());
}

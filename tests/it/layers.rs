//! The module tree tells the truth: no top-level module of `src/` imports one above it in the
//! layer list of ARCHITECTURE.md, and every module `lib.rs` declares is in that list.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The numbered list under `## Layers`: "1. `error` — …".
fn layers(architecture: &str) -> Vec<String> {
    let section = architecture
        .split("\n## ")
        .find(|s| s.starts_with("Layers"))
        .expect("ARCHITECTURE.md has a `## Layers` section");
    section
        .lines()
        .filter_map(|line| {
            let (number, rest) = line.split_once(". `")?;
            number.trim().parse::<u32>().ok()?;
            Some(rest.split('`').next()?.to_string())
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its tests: test files, and each item marked `#[cfg(test)]`
/// (a test module, a test-only helper), cut out up to its closing brace or semicolon.
fn non_test_code(path: &Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy();
    if name == "tests.rs" || name.ends_with("_tests.rs") {
        return String::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    let mut kept = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("#[cfg(test)]") {
        kept.push_str(&rest[..i]);
        rest = &rest[i + "#[cfg(test)]".len()..];
        rest = &rest[item_end(rest)..];
    }
    kept.push_str(rest);
    kept
}

/// Where the item at the start of `text` ends: after its first `;` when that comes before any
/// `{` (`mod tests;`, a `use`), else after the brace that closes the first `{`.
fn item_end(text: &str) -> usize {
    let open = text.find('{');
    match text.find(';') {
        Some(semi) if open.is_none_or(|open| semi < open) => return semi + 1,
        _ => {}
    }
    let Some(open) = open else {
        return text.len();
    };
    let mut depth = 0usize;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return open + i + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// Each `crate::<name>` a text names, with its line number; comments included, since a doc
/// link to a higher layer is a dependency in the reader's head too.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let names: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group
                    .split('}')
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .map(|n| n.trim().split("::").next().unwrap_or_default())
                    .collect(),
                None => vec![
                    rest.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .next()
                        .unwrap_or_default(),
                ],
            };
            found.extend(names.into_iter().map(|n| (number + 1, n.to_string())));
        }
    }
    found
}

fn declared_modules(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

#[test]
fn no_module_imports_a_layer_above_it() {
    let architecture = std::fs::read_to_string(Path::new(ROOT).join("ARCHITECTURE.md")).unwrap();
    let order = layers(&architecture);
    assert!(
        order.len() >= 10,
        "layer list read from ARCHITECTURE.md: {order:?}"
    );
    let rank: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let src = Path::new(ROOT).join("src");

    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let unlisted: Vec<String> = declared_modules(&lib)
        .into_iter()
        .filter(|m| !rank.contains_key(m.as_str()))
        .collect();
    assert!(
        unlisted.is_empty(),
        "src/lib.rs declares modules that ARCHITECTURE.md's layer list does not place: \
         {unlisted:?}; add each to the list, in its place"
    );

    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut upward = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let top = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        let Some(&own) = rank.get(top.as_str()) else {
            continue; // lib.rs and main.rs sit above every layer
        };
        for (line, name) in crate_paths(&non_test_code(file)) {
            if let Some(&other) = rank.get(name.as_str())
                && other > own
            {
                upward.push(format!(
                    "src/{}:{line}: `{top}` names `crate::{name}`, a layer above it",
                    relative.display()
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports against the layer order of ARCHITECTURE.md (move the shared type down, or \
         pass it in from above):\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_layer_reader_sees_imports_in_every_form() {
    let text = "use crate::host::open::OpenSpec;\nlet x = crate::model::connect();\n\
                use crate::{llm_loop, backend::native};\n// see crate::surface\n";
    let names: Vec<(usize, String)> = crate_paths(text);
    let names: Vec<(usize, &str)> = names.iter().map(|(l, n)| (*l, n.as_str())).collect();
    assert_eq!(
        names,
        [
            (1, "host"),
            (2, "model"),
            (3, "llm_loop"),
            (3, "backend"),
            (4, "surface")
        ]
    );
    let listed =
        layers("# A\n\n## Layers\n\n1. `error` — e\n2. `event` — v\n   3. no\n\n## Next\n4. `x`");
    assert_eq!(listed, ["error", "event"]);
}

//! What every target does: the bytes as a reply's text, through one parser; a call that
//! breaks the parser's promise (see `corral::fuzz_recover`) is a crash.

pub fn run(family: &str, data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(broken) = corral::fuzz_recover(family, text) {
        panic!("{broken}");
    }
}

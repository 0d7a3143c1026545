//! Just enough of the GGUF format to read a model's chat template from its metadata, so corral
//! can tell whether the template knows about tools before it starts a server for the file.
//!
//! Layout: magic `GGUF`, version (u32), tensor count (u64), metadata count (u64), then that
//! many `key (string) · type (u32) · value` entries. Strings are a u64 length plus bytes;
//! arrays are an element type, a u64 count and the elements. All little-endian.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

const MAGIC: &[u8; 4] = b"GGUF";
const TEMPLATE_KEY: &str = "tokenizer.chat_template";
/// No real key or template is this long; a larger length means a damaged file.
const MAX_STRING: u64 = 16 * 1024 * 1024;

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

struct Reader<R: Read> {
    inner: R,
}

impl<R: Read> Reader<R> {
    fn bytes<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let mut buf = [0u8; N];
        self.inner.read_exact(&mut buf)?;
        Ok(buf)
    }

    fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }

    fn skip(&mut self, n: u64) -> io::Result<()> {
        let copied = io::copy(&mut (&mut self.inner).take(n), &mut io::sink())?;
        if copied == n {
            Ok(())
        } else {
            Err(invalid("the GGUF metadata ends early"))
        }
    }

    fn string(&mut self) -> io::Result<String> {
        let len = self.u64()?;
        if len > MAX_STRING {
            return Err(invalid(format!("a GGUF string of {len} bytes")));
        }
        let mut buf = vec![0u8; len as usize];
        self.inner.read_exact(&mut buf)?;
        String::from_utf8(buf).map_err(|_| invalid("a GGUF string is not UTF-8"))
    }

    /// Skips one value of `kind`.
    fn skip_value(&mut self, kind: u32) -> io::Result<()> {
        match kind {
            0 | 1 | 7 => self.skip(1),
            2 | 3 => self.skip(2),
            4..=6 => self.skip(4),
            10..=12 => self.skip(8),
            8 => {
                let len = self.u64()?;
                self.skip(len)
            }
            9 => {
                let element = self.u32()?;
                let count = self.u64()?;
                match fixed_size(element) {
                    Some(size) => self.skip(size * count),
                    None => {
                        for _ in 0..count {
                            self.skip_value(element)?;
                        }
                        Ok(())
                    }
                }
            }
            other => Err(invalid(format!("unknown GGUF value type {other}"))),
        }
    }
}

fn fixed_size(kind: u32) -> Option<u64> {
    match kind {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

/// The chat template stored in a GGUF file, if it has one. Errors name what is wrong with
/// the file (not GGUF, truncated, damaged).
pub fn chat_template(path: &Path) -> io::Result<Option<String>> {
    let mut reader = Reader {
        inner: BufReader::new(File::open(path)?),
    };
    if &reader.bytes::<4>()? != MAGIC {
        return Err(invalid(format!("{} is not a GGUF file", path.display())));
    }
    let version = reader.u32()?;
    if !(2..=3).contains(&version) {
        return Err(invalid(format!("GGUF version {version} is not supported")));
    }
    let _tensors = reader.u64()?;
    let entries = reader.u64()?;
    for _ in 0..entries {
        let key = reader.string()?;
        let kind = reader.u32()?;
        if key == TEMPLATE_KEY && kind == 8 {
            return reader.string().map(Some);
        }
        reader.skip_value(kind)?;
    }
    Ok(None)
}

/// Whether a template renders the `tools` of a request (otherwise llama.cpp falls back to a
/// generic format small models handle badly).
pub fn template_supports_tools(template: &str) -> bool {
    template.contains("tools")
        && (template.contains("tool_call") || template.contains("tool_calls"))
}

/// A ChatML template (`<|im_start|>` turns) can take corral's ChatML-with-tools template.
pub fn template_is_chatml(template: &str) -> bool {
    template.contains("<|im_start|>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s.as_bytes());
    }

    fn gguf(entries: &[(&str, u32, Vec<u8>)]) -> tempfile::NamedTempFile {
        let mut bytes = b"GGUF".to_vec();
        bytes.extend(3u32.to_le_bytes());
        bytes.extend(0u64.to_le_bytes());
        bytes.extend((entries.len() as u64).to_le_bytes());
        for (key, kind, value) in entries {
            string(&mut bytes, key);
            bytes.extend(kind.to_le_bytes());
            bytes.extend(value);
        }
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(&bytes).unwrap();
        file
    }

    #[test]
    fn finds_the_template_after_skipping_arrays_and_scalars() {
        let mut tokens = Vec::new();
        tokens.extend(8u32.to_le_bytes());
        tokens.extend(2u64.to_le_bytes());
        string(&mut tokens, "<s>");
        string(&mut tokens, "hello");
        let mut template = Vec::new();
        string(&mut template, "<|im_start|>{{ message }}");
        let file = gguf(&[
            ("general.architecture", 8, {
                let mut v = Vec::new();
                string(&mut v, "llama");
                v
            }),
            ("llama.context_length", 4, 8192u32.to_le_bytes().to_vec()),
            ("tokenizer.ggml.tokens", 9, tokens),
            ("tokenizer.chat_template", 8, template),
        ]);
        let found = chat_template(file.path()).unwrap().unwrap();
        assert!(template_is_chatml(&found) && !template_supports_tools(&found));
    }

    #[test]
    fn missing_templates_and_bad_files_are_told_apart() {
        let file = gguf(&[("general.name", 8, {
            let mut v = Vec::new();
            string(&mut v, "x");
            v
        })]);
        assert_eq!(chat_template(file.path()).unwrap(), None);
        let mut bad = tempfile::NamedTempFile::new().unwrap();
        bad.write_all(b"not a model").unwrap();
        assert!(
            chat_template(bad.path())
                .unwrap_err()
                .to_string()
                .contains("not a GGUF")
        );
        assert!(template_supports_tools(include_str!(
            "../../templates/chatml-tools.jinja"
        )));
    }
}

//! The requests the editor sends for the tools, as they go on the wire.

use std::path::Path;

use serde_json::json;

use super::super::wire;
use super::*;

#[test]
fn a_whole_buffer_is_asked_for_without_line_or_limit() {
    let request = read_request("s1", Path::new("/r/a.txt"), None, None).unwrap();
    assert_eq!(
        wire(&request),
        json!({"sessionId": "s1", "path": "/r/a.txt"})
    );
}

#[test]
fn a_range_is_asked_for_by_its_first_line_and_line_count() {
    let request = read_request("s1", Path::new("/r/a.txt"), Some(3), Some(5)).unwrap();
    assert_eq!(
        wire(&request),
        json!({"sessionId": "s1", "path": "/r/a.txt", "line": 3, "limit": 5})
    );
}

#[test]
fn a_line_the_protocol_cannot_carry_is_an_error_naming_the_file() {
    // ACP's line and limit are u32: a larger one is refused, not wrapped or dropped.
    let too_far = u64::from(u32::MAX) + 1;
    let err = read_request("s1", Path::new("/r/a.txt"), Some(too_far), None).unwrap_err();
    assert!(err.starts_with("reading /r/a.txt: "), "{err}");
    assert!(err.contains("4294967296"), "{err}");
    let err = read_request("s1", Path::new("/r/a.txt"), None, Some(too_far)).unwrap_err();
    assert!(err.contains("4294967296"), "{err}");
}

#[test]
fn a_write_carries_its_content_unchanged() {
    let content = "first line\n\tsecond: «ünïcode» \"quoted\"\n".to_string();
    let request = write_request("s2", Path::new("/r/sub/b.txt"), content.clone()).unwrap();
    assert_eq!(
        wire(&request),
        json!({"sessionId": "s2", "path": "/r/sub/b.txt", "content": content})
    );
}

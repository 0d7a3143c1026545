//! Processes as `/proc` shows them, for tests that check what a run left behind: a process
//! group's live members, a pid's group and start time.

/// `/proc/<pid>/stat` fields after the command name: [0] is field 3 (state).
pub fn stat(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_owned).collect())
}

pub fn pgid_of(pid: u32) -> Option<u32> {
    stat(pid)?.get(2)?.parse().ok()
}

pub fn start_time_of(pid: u32) -> Option<u64> {
    stat(pid)?.get(19)?.parse().ok()
}

/// Live (not zombie) processes of the process group `pgid`.
pub fn members(pgid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if let Some(fields) = stat(pid)
            && fields[0] != "Z"
            && fields.get(2).and_then(|g| g.parse().ok()) == Some(pgid)
        {
            found.push(pid);
        }
    }
    found
}

/// The entries of a runtime's `pids.json` (empty when it is missing or unreadable).
pub fn tracked(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<Vec<serde_json::Value>>(&t).ok())
        .unwrap_or_default()
}

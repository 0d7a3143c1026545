use std::fs;
use std::path::{Path, PathBuf};

use super::*;

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| n.to_string()).collect()
}

fn agents() -> Vec<String> {
    names(&["AGENTS.md"])
}

/// A canonical temp dir (the loader's roots are canonical).
fn tmp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

fn mkdir(path: &Path) -> PathBuf {
    fs::create_dir_all(path).unwrap();
    path.to_path_buf()
}

fn paths(loaded: &Instructions) -> Vec<String> {
    loaded.files.iter().map(|f| f.path.clone()).collect()
}

fn text(loaded: &Instructions) -> &str {
    loaded.text.as_deref().unwrap_or_default()
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn the_global_file_then_the_repository_down_to_the_root_and_nothing_above_the_repository() {
    let (_dir, base) = tmp();
    let global = mkdir(&base.join("config"));
    fs::write(global.join("AGENTS.md"), "GLOBAL rules\n").unwrap();
    let outer = mkdir(&base.join("outer"));
    fs::write(outer.join("AGENTS.md"), "OUTER secret\n").unwrap();
    let repo = mkdir(&outer.join("repo"));
    git2::Repository::init(&repo).unwrap();
    fs::write(repo.join("AGENTS.md"), "REPO rules\n").unwrap();
    let middle = mkdir(&repo.join("middle"));
    fs::write(middle.join("CLAUDE.md"), "MIDDLE rules\n").unwrap();
    let root = mkdir(&middle.join("root"));
    fs::write(root.join("AGENTS.md"), "ROOT rules\n").unwrap();

    let loaded = load(&names(&["AGENTS.md", "CLAUDE.md"]), Some(&global), &root);
    assert_eq!(
        paths(&loaded),
        [
            shown(&global.join("AGENTS.md")),
            shown(&repo.join("AGENTS.md")),
            shown(&middle.join("CLAUDE.md")),
            shown(&root.join("AGENTS.md")),
        ]
    );
    let text = text(&loaded);
    assert!(!text.contains("OUTER"), "{text}");
    let order: Vec<usize> = ["GLOBAL", "REPO", "MIDDLE", "ROOT"]
        .iter()
        .map(|word| text.find(word).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert!(loaded.files.iter().all(|f| !f.truncated));
    assert_eq!(loaded.files[3].bytes, "ROOT rules\n".len() as u64);

    // Only the names asked for; none at all when the list is empty.
    let only_agents = load(&agents(), None, &root);
    assert!(!text_of(&only_agents).contains("MIDDLE"));
    assert_eq!(load(&[], Some(&global), &root), Instructions::default());
}

fn text_of(loaded: &Instructions) -> String {
    loaded.text.clone().unwrap_or_default()
}

#[test]
fn outside_a_repository_only_the_root_counts_and_a_fake_git_makes_no_repository() {
    let (_dir, base) = tmp();
    let plain = mkdir(&base.join("plain"));
    fs::write(plain.join("AGENTS.md"), "PLAIN above the root\n").unwrap();
    let root = mkdir(&plain.join("root"));
    fs::write(root.join("AGENTS.md"), "ROOT\n").unwrap();
    let loaded = load(&agents(), None, &root);
    assert_eq!(paths(&loaded), [shown(&root.join("AGENTS.md"))]);

    // A `.git` that is no repository (a planted file) does not open the ancestors.
    let fake = mkdir(&base.join("fake"));
    fs::write(fake.join(".git"), "gitdir: /nonexistent\n").unwrap();
    fs::write(fake.join("AGENTS.md"), "FAKE above the root\n").unwrap();
    let inner = mkdir(&fake.join("inner"));
    let loaded = load(&agents(), None, &inner);
    assert_eq!(loaded, Instructions::default(), "{:?}", loaded.text);

    // A root inside the git directory is not in the working tree.
    let repo = mkdir(&base.join("repo"));
    git2::Repository::init(&repo).unwrap();
    fs::write(repo.join("AGENTS.md"), "REPO\n").unwrap();
    let in_git = mkdir(&repo.join(".git/info"));
    assert_eq!(load(&agents(), None, &in_git), Instructions::default());
}

#[test]
fn symlinks_out_of_the_tree_are_not_followed_and_one_file_under_two_names_counts_once() {
    let (_dir, base) = tmp();
    let secret = base.join("jwt-secret");
    fs::write(&secret, "TOPSECRET\n").unwrap();
    let repo = mkdir(&base.join("repo"));
    git2::Repository::init(&repo).unwrap();
    std::os::unix::fs::symlink(&secret, repo.join("AGENTS.md")).unwrap();
    let root = mkdir(&repo.join("root"));
    std::os::unix::fs::symlink("../../jwt-secret", root.join("AGENTS.md")).unwrap();
    let loaded = load(&agents(), None, &root);
    assert_eq!(loaded, Instructions::default(), "{:?}", loaded.text);

    // Inside the tree a link is fine, and the file it names is read once.
    let other = mkdir(&base.join("other"));
    fs::write(other.join("AGENTS.md"), "SHARED\n").unwrap();
    std::os::unix::fs::symlink("AGENTS.md", other.join("CLAUDE.md")).unwrap();
    let loaded = load(&names(&["AGENTS.md", "CLAUDE.md"]), None, &other);
    assert_eq!(paths(&loaded), [shown(&other.join("AGENTS.md"))]);
}

#[test]
fn a_fifo_or_a_device_is_neither_waited_on_nor_read() {
    use nix::sys::stat::{Mode, SFlag, makedev, mknod};
    let (_dir, root) = tmp();
    let fifo = mkdir(&root.join("fifo"));
    nix::unistd::mkfifo(&fifo.join("AGENTS.md"), Mode::S_IRWXU).unwrap();
    // /dev/zero's numbers: it never ends, and reading it would fill the prompt with NULs.
    let device = mkdir(&root.join("device"));
    mknod(
        &device.join("AGENTS.md"),
        SFlag::S_IFCHR,
        Mode::S_IRUSR,
        makedev(1, 5),
    )
    .expect("mknod (tests run as root)");
    let (done, finished) = std::sync::mpsc::channel();
    let (fifo_root, device_root) = (fifo, device);
    std::thread::spawn(move || {
        let _ = done.send((
            load(&agents(), None, &fifo_root),
            load(&agents(), None, &device_root),
        ));
    });
    let (from_fifo, from_device) = finished
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("loading hung on a FIFO");
    assert_eq!(from_fifo, Instructions::default());
    assert_eq!(
        from_device,
        Instructions::default(),
        "{:?}",
        from_device.files
    );
}

#[test]
fn a_huge_file_is_cut_at_the_cap_with_a_note() {
    let (_dir, root) = tmp();
    let line = "- keep the tests green\n";
    let huge = line.repeat(1024 * 1024 / line.len() + 1);
    fs::write(root.join("AGENTS.md"), &huge).unwrap();
    let loaded = load(&agents(), None, &root);
    let file = &loaded.files[0];
    assert!(file.truncated);
    assert!(
        file.bytes <= MAX_FILE_BYTES as u64 && file.bytes > (MAX_FILE_BYTES - LINE_SNAP) as u64,
        "{file:?}"
    );
    let text = text(&loaded);
    assert!(text.len() < MAX_FILE_BYTES + 1024, "{}", text.len());
    assert!(
        text.contains(&format!("the file has {} bytes", huge.len())),
        "{}",
        &text[text.len() - 300..]
    );
    // Cut at a line break.
    assert!(
        text.contains("green\n[… cut"),
        "{}",
        &text[text.len() - 300..]
    );

    // 64 GiB (sparse): only the share is read, so this takes no time and no memory.
    let sparse = mkdir(&root.join("sparse"));
    let size = 64u64 << 30;
    fs::File::create(sparse.join("AGENTS.md"))
        .unwrap()
        .set_len(size)
        .unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(load(&agents(), None, &sparse));
    });
    let loaded = finished
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the whole file was read");
    assert_eq!(loaded.files[0].bytes, MAX_FILE_BYTES as u64);
    assert!(text_of(&loaded).contains(&format!("the file has {size} bytes")));
}

#[test]
fn nearer_files_get_their_share_first_and_the_rest_is_named() {
    let (_dir, base) = tmp();
    let repo = mkdir(&base.join("repo"));
    git2::Repository::init(&repo).unwrap();
    let a = mkdir(&repo.join("a"));
    let b = mkdir(&a.join("b"));
    let root = mkdir(&b.join("c"));
    let body = |word: &str| format!("{word}\n").repeat(15 * 1024 / (word.len() + 1));
    for (dir, word) in [(&repo, "far"), (&a, "mid"), (&b, "near"), (&root, "here")] {
        fs::write(dir.join("AGENTS.md"), body(word)).unwrap();
    }
    let loaded = load(&agents(), None, &root);
    let files = &loaded.files;
    assert_eq!(files.len(), 4);
    let total: u64 = files.iter().map(|f| f.bytes).sum();
    assert!(total <= MAX_TOTAL_BYTES as u64, "{files:?}");
    // The two nearest whole, the next cut to what was left, the farthest left out.
    assert!(!files[3].truncated && !files[2].truncated, "{files:?}");
    assert!(files[1].truncated && files[1].bytes > 0, "{files:?}");
    assert!(files[0].truncated && files[0].bytes == 0, "{files:?}");
    let text = text(&loaded);
    assert!(
        text.contains("[left out: the project instructions reached"),
        "{text}"
    );
    assert!(!text.contains("far\n"));
}

#[test]
fn a_cut_never_splits_a_character() {
    let bytes = "ééé".as_bytes();
    assert_eq!(cut_point(bytes, 3), 2);
    assert_eq!(cut_point(bytes, 4), 4);
    assert_eq!(cut_point(b"ab\ncd", 4), 3);
}

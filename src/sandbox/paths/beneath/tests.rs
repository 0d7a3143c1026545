use super::*;
use std::io::Read;
use std::os::unix::fs::symlink;

/// `<tmp>/root` (with `a.txt` and `sub/`) next to `<tmp>/outside/secret`.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (root, outside) = (base.join("root"), base.join("outside"));
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("a.txt"), "a").unwrap();
    std::fs::write(outside.join("secret"), "s").unwrap();
    (tmp, root, outside)
}

/// The kernel-checked root where openat2 exists, plus the fallback: both must agree on
/// every case below (they differ only under races).
fn roots(root: &Path) -> Vec<RootDir> {
    let mut roots = vec![RootDir::with_kernel(root, false).unwrap()];
    if openat2_supported() {
        roots.push(RootDir::with_kernel(root, true).unwrap());
    }
    roots
}

fn read(dir: &RootDir, path: &str) -> Result<String, PathError> {
    let mut text = String::new();
    dir.open_file(path)?.read_to_string(&mut text).unwrap();
    Ok(text)
}

fn is_outside<T: std::fmt::Debug>(r: Result<T, PathError>) -> bool {
    matches!(r, Err(PathError::OutsideRoot { .. }))
}

#[test]
fn openat2_is_available_on_this_kernel() {
    // Linux 5.6+; a failure here means the fallback path is what actually runs.
    assert!(openat2_supported());
}

#[test]
fn files_open_by_relative_and_inside_absolute_paths() {
    let (_t, root, _) = setup();
    for dir in roots(&root) {
        assert_eq!(read(&dir, "a.txt").unwrap(), "a");
        assert_eq!(read(&dir, "./sub/../a.txt").unwrap(), "a");
        assert_eq!(
            read(&dir, root.join("a.txt").to_str().unwrap()).unwrap(),
            "a"
        );
        let missing = dir.open_file("sub/nope").unwrap_err();
        assert!(
            matches!(&missing, PathError::Io { kind: io::ErrorKind::NotFound, requested, .. }
                if requested == "sub/nope"),
            "{missing:?}"
        );
        assert!(matches!(
            dir.open_file("a\0b"),
            Err(PathError::Invalid { .. })
        ));
    }
}

#[test]
fn dot_dot_and_absolute_outside_paths_are_refused() {
    let (_t, root, outside) = setup();
    let secret = outside.join("secret");
    for dir in roots(&root) {
        for path in [
            "../outside/secret",
            "sub/../../outside/secret",
            "/etc/passwd",
        ] {
            assert!(is_outside(dir.open_file(path)), "{path}");
            assert!(is_outside(dir.prepare_write(path)), "{path}");
        }
        assert!(is_outside(dir.open_file(&secret)));
        assert!(is_outside(dir.locate("..")));
        let err = dir.open_file("../outside/secret").unwrap_err();
        let expected = format!(
            "path ../outside/secret is outside the session root {}",
            root.display()
        );
        assert_eq!(err.to_string(), expected);
    }
}

#[test]
fn symlinks_leading_out_are_refused_for_read_and_write() {
    let (_t, root, outside) = setup();
    symlink(&outside, root.join("out")).unwrap();
    symlink("../outside/secret", root.join("secret-rel")).unwrap();
    symlink(outside.join("secret"), root.join("secret-abs")).unwrap();
    symlink(outside.join("nope"), root.join("dangling-out")).unwrap();
    for dir in roots(&root) {
        for path in ["out/secret", "secret-rel", "secret-abs"] {
            assert!(is_outside(dir.open_file(path)), "{path}");
        }
        for path in [
            "out/new",
            "out/secret",
            "secret-rel",
            "secret-abs",
            "dangling-out",
        ] {
            assert!(is_outside(dir.prepare_write(path)), "{path}");
        }
        assert!(is_outside(dir.locate("out")));
    }
    let names: Vec<_> = std::fs::read_dir(&outside).unwrap().collect();
    assert_eq!(names.len(), 1, "nothing created outside");
}

#[test]
fn symlinks_staying_inside_are_followed() {
    let (_t, root, _) = setup();
    std::fs::write(root.join("sub/f"), "f").unwrap();
    symlink("sub", root.join("alias")).unwrap();
    symlink("a.txt", root.join("a-link")).unwrap();
    // Absolute, but inside: openat2 refuses it, the hand resolution lets it through.
    symlink(root.join("sub/f"), root.join("abs-link")).unwrap();
    symlink("sub/later.txt", root.join("dangling-in")).unwrap();
    for dir in roots(&root) {
        assert_eq!(read(&dir, "alias/f").unwrap(), "f");
        assert_eq!(read(&dir, "a-link").unwrap(), "a");
        assert_eq!(read(&dir, "abs-link").unwrap(), "f");
        let found = dir.locate("alias").unwrap();
        assert_eq!((found.path, found.is_dir), (root.join("sub"), true));
        let target = dir.prepare_write("a-link").unwrap();
        assert_eq!(target.name, "a.txt");
        assert!(matches!(target.existing, Existing::File { .. }));
        let target = dir.prepare_write("dangling-in").unwrap();
        assert_eq!(
            (target.name.as_os_str(), target.existing),
            (OsStr::new("later.txt"), Existing::Nothing)
        );
        let target = dir.prepare_write("alias/g").unwrap();
        let stat = rustix::fs::fstat(&target.dir).unwrap();
        let sub = std::fs::metadata(root.join("sub")).unwrap();
        assert_eq!(stat.st_ino, std::os::unix::fs::MetadataExt::ino(&sub));
    }
}

#[test]
fn writes_create_parents_beneath_and_name_a_single_file() {
    let (_t, root, _) = setup();
    for (i, dir) in roots(&root).iter().enumerate() {
        let target = dir.prepare_write(&format!("new{i}/deeper/f.txt")).unwrap();
        assert_eq!(target.name, "f.txt");
        assert!(root.join(format!("new{i}/deeper")).is_dir());
        assert_eq!(
            dir.prepare_write("sub").unwrap().existing,
            Existing::Directory
        );
        for path in [".", "", "sub/.."] {
            let err = dir.prepare_write(path).unwrap_err();
            assert!(matches!(err, PathError::Invalid { .. }), "{path}: {err:?}");
        }
        // An escape is refused before any directory on the way is made.
        assert!(is_outside(dir.prepare_write(&format!("made{i}/../../x"))));
        assert!(!root.join(format!("made{i}")).exists());
    }
}

#[test]
fn a_root_whose_path_now_leads_through_a_symlink_is_refused() {
    let (_t, root, outside) = setup();
    let parent = root.parent().unwrap().to_path_buf();
    std::fs::create_dir(outside.join("root")).unwrap();
    for kernel in [false, true] {
        let nested = parent.join(format!("nest{kernel}"));
        std::fs::create_dir_all(nested.join("root")).unwrap();
        RootDir::with_kernel(&nested.join("root"), kernel).unwrap();
        std::fs::rename(&nested, parent.join(format!("moved{kernel}"))).unwrap();
        symlink(&outside, &nested).unwrap();
        let err = RootDir::with_kernel(&nested.join("root"), kernel).unwrap_err();
        assert!(err.to_string().contains("no longer resolves"), "{err}");
    }
}

#[test]
fn symlink_loops_are_errors_not_hangs() {
    let (_t, root, _) = setup();
    symlink("loop-b", root.join("loop-a")).unwrap();
    symlink("loop-a", root.join("loop-b")).unwrap();
    for dir in roots(&root) {
        assert!(matches!(dir.open_file("loop-a"), Err(PathError::Io { .. })));
        assert!(matches!(
            dir.prepare_write("loop-a"),
            Err(PathError::Io { .. })
        ));
    }
}

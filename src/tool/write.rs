//! `write_file`: replace or create a file inside the session root.
//!
//! The new content goes to a temporary file beside the target and is renamed over it, so a
//! crash or a full disk never leaves a half-written file; an existing file keeps its
//! permissions. The directory is opened beneath the root by the kernel (see
//! [`RootDir::prepare_write`]) and everything after goes through that descriptor: the temp
//! file is created in it and renamed within it. A rename replaces a directory entry, never
//! writes through it, so a symlink swapped in as the final name is replaced, not followed.
//! (Moving the opened directory itself out of the root is outside what openat2 can see;
//! landlock covers that.)

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use serde::Deserialize;
use serde_json::Value;

use super::output::{io_error, open_root, parse_args, run_blocking};
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use crate::sandbox::paths::Existing;

/// Random temp names tried before giving up; a clash needs a leftover with the same name.
const TEMP_ATTEMPTS: usize = 16;

pub(crate) struct WriteFile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

impl Tool for WriteFile {
    fn name(&self) -> &'static str {
        "write_file"
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: WriteArgs = parse_args(args)?;
            if let Some(editor) = ctx.settings.editor.as_ref().filter(|e| e.0.writes()) {
                if args.path.trim().is_empty() {
                    return Err(ToolError::InvalidArguments("path is empty".into()));
                }
                return super::editor::write(&editor.0, ctx, &args.path, args.content).await;
            }
            run_blocking(ctx, move |ctx| write_file(ctx, &args)).await
        })
    }
}

fn write_file(ctx: &ToolContext, args: &WriteArgs) -> Result<ToolOutput, ToolError> {
    let existing = write_text(ctx, &args.path, args.content.as_bytes())?;
    let verb = if existing == Existing::Nothing {
        "created"
    } else {
        "replaced"
    };
    Ok(ToolOutput::text(format!(
        "{verb} {} ({} bytes written)",
        args.path,
        args.content.len()
    )))
}

/// Writes `content` to `path` beneath the root, atomically, through the directory the kernel
/// opened (see the module docs), with the guards of `prepare_write`. Returns what the name
/// was before. Every tool that writes a file by path writes it here.
pub(super) fn write_text(
    ctx: &ToolContext,
    path: &str,
    content: &[u8],
) -> Result<Existing, ToolError> {
    if path.trim().is_empty() {
        return Err(ToolError::InvalidArguments("path is empty".into()));
    }
    let target = open_root(ctx)?.prepare_write(path)?;
    let mode = match target.existing {
        Existing::Directory => {
            return Err(ToolError::Refused(format!(
                "{path} is a directory; only files are written"
            )));
        }
        Existing::File { mode } => Some(mode),
        Existing::Nothing | Existing::Other => None,
    };
    write_atomically(&target.dir, &target.name, content, mode).map_err(|e| io_error(&e, path))?;
    Ok(target.existing)
}

/// Deletes the file `path` names beneath the root, found and guarded as a write to it is
/// (through a link that stays inside, the file it points to).
pub(super) fn remove_file(ctx: &ToolContext, path: &str) -> Result<(), ToolError> {
    let target = open_root(ctx)?.prepare_write(path)?;
    match target.existing {
        Existing::Nothing => Err(ToolError::NotFound(format!("{path} does not exist"))),
        Existing::Directory => Err(ToolError::Refused(format!(
            "{path} is a directory; only files are deleted"
        ))),
        Existing::File { .. } | Existing::Other => {
            rustix::fs::unlinkat(&target.dir, &target.name, AtFlags::empty())
                .map_err(|e| io_error(&e.into(), path))
        }
    }
}

/// Writes `bytes` to a new temp file in `dir`, syncs it and renames it to `name`. `mode`:
/// the permissions of the file being replaced, if any.
fn write_atomically(
    dir: &OwnedFd,
    name: &OsStr,
    bytes: &[u8],
    mode: Option<u32>,
) -> io::Result<()> {
    let (temp, fd) = create_temp(dir, mode.is_some())?;
    let written = fill(fd, bytes, mode).and_then(|()| {
        rustix::fs::renameat(dir, &temp, dir, name)?;
        Ok(())
    });
    if written.is_err() {
        // Best effort: the failure that got us here is what the model needs to hear about.
        let _ = rustix::fs::unlinkat(dir, &temp, AtFlags::empty());
    }
    written
}

/// Creates `.corral-write-XXXXXXXX` in `dir`. O_EXCL never follows or reuses an entry. A
/// replacement starts private (its real mode is set before any content goes in); a new file
/// gets the usual 0666 less the umask.
fn create_temp(dir: &OwnedFd, replacing: bool) -> io::Result<(String, OwnedFd)> {
    let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
    let mode = Mode::from_raw_mode(if replacing { 0o600 } else { 0o666 });
    for _ in 0..TEMP_ATTEMPTS {
        let name = format!(".corral-write-{:08x}", fastrand::u32(..));
        match rustix::fs::openat(dir, &name, flags, mode) {
            Ok(fd) => return Ok((name, fd)),
            Err(Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary file name",
    ))
}

fn fill(fd: OwnedFd, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    if let Some(mode) = mode {
        // fchmod is not subject to the umask, so the replaced file's mode comes back exactly.
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
    }
    let mut file = File::from(fd);
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::super::guard::{Guard, guard};
    use super::super::output::testing::session;
    use super::*;
    use serde_json::json;

    async fn write(ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        WriteFile.call(args, ctx).await
    }

    #[tokio::test]
    async fn creates_parents_and_reports_bytes() {
        let (_tmp, ctx) = session();
        let out = write(&ctx, json!({"path": "a/b/c.txt", "content": "héllo\n"}))
            .await
            .unwrap();
        assert_eq!(out.text, "created a/b/c.txt (7 bytes written)");
        assert_eq!(
            std::fs::read_to_string(ctx.root.join("a/b/c.txt")).unwrap(),
            "héllo\n"
        );
        let out = write(&ctx, json!({"path": "a/b/c.txt", "content": "x"}))
            .await
            .unwrap();
        assert!(out.text.starts_with("replaced"));
    }

    #[tokio::test]
    async fn keeps_permissions_and_leaves_no_temp_files() {
        use std::os::unix::fs::PermissionsExt;
        let (_tmp, ctx) = session();
        let path = ctx.root.join("run.sh");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        write(&ctx, json!({"path": "run.sh", "content": "new"}))
            .await
            .unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        let names: Vec<_> = std::fs::read_dir(&ctx.root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[tokio::test]
    async fn refuses_outside_paths_symlink_escapes_and_directories() {
        let (tmp, ctx) = session();
        for path in ["../escape.txt", "/etc/corral-test", "sub/../../x"] {
            let e = write(&ctx, json!({"path": path, "content": "x"}))
                .await
                .unwrap_err();
            assert!(matches!(e, ToolError::OutsideRoot(_)), "{path}: {e}");
        }
        std::os::unix::fs::symlink(tmp.path(), ctx.root.join("link")).unwrap();
        let e = write(&ctx, json!({"path": "link/x.txt", "content": "x"}))
            .await
            .unwrap_err();
        assert!(matches!(e, ToolError::OutsideRoot(_)), "{e}");
        assert!(!tmp.path().join("x.txt").exists());
        std::fs::create_dir(ctx.root.join("d")).unwrap();
        let e = write(&ctx, json!({"path": "d", "content": "x"}))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
    }

    #[tokio::test]
    async fn git_files_are_refused_by_every_path_and_nothing_is_made_on_the_way() {
        let (_tmp, ctx) = session();
        let root = &ctx.root;
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(root.join("sub/.git")).unwrap();
        let planted = root.join("planted");
        for dir in ["objects", "refs"] {
            std::fs::create_dir_all(planted.join(dir)).unwrap();
        }
        std::fs::write(planted.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let link = |target: &str, name: &str| {
            std::os::unix::fs::symlink(target, root.join(name)).unwrap();
        };
        link(".git", "docs");
        link(".git/config", "cfg");
        link("sub/.git/new-dir/x", "dangling");
        for path in [
            ".git/config",
            ".git/hooks/pre-commit",
            "./.git/config",
            ".GIT/config",
            "sub/.git/config",
            "new/.git/config",
            "docs/.git",
            "deep/er/.git",
            "git~1/config",
            "docs/config",
            "docs/made/inside",
            "cfg",
            "dangling",
            "planted/config",
            "planted/refs/heads/x",
        ] {
            let e = write(
                &ctx,
                json!({"path": path, "content": "[core]\n\tfsmonitor = x\n"}),
            )
            .await
            .unwrap_err();
            assert!(
                matches!(&e, ToolError::Refused(m) if m.contains("git's own files")),
                "{path}: {e}"
            );
            assert_eq!(
                guard("write_file", &json!({"path": path}), root)
                    .map(|g| matches!(g, Guard::Never(_))),
                Some(true),
                "{path}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n"
        );
        for made in ["new", "deep", ".git/made", "sub/.git/new-dir", "docs/.git"] {
            assert!(!root.join(made).exists(), "{made} was created");
        }
        // Reading git's files is harmless and allowed; so are names that only look alike.
        assert!(
            super::super::fs::ReadFile
                .call(json!({"path": "docs/config"}), &ctx)
                .await
                .is_ok()
        );
        for path in [".gitignore", ".github/workflows/ci.yml", "src/git.rs"] {
            write(&ctx, json!({"path": path, "content": "x"}))
                .await
                .unwrap();
        }
    }

    #[tokio::test]
    async fn agent_config_asks_by_its_name_and_is_never_reached_through_a_link() {
        let (_tmp, ctx) = session();
        let root = &ctx.root;
        std::fs::create_dir(root.join(".claude")).unwrap();
        std::os::unix::fs::symlink(".claude", root.join("cfg")).unwrap();
        std::os::unix::fs::symlink(".vscode/tasks.json", root.join("tasks")).unwrap();
        let person = |path: &str| guard("write_file", &json!({"path": path}), root);
        for path in [
            ".claude/settings.json",
            "a/.mcp.json",
            "opencode.json",
            ".vscode/tasks.json",
        ] {
            assert!(matches!(person(path), Some(Guard::Person(_))), "{path}");
        }
        let absolute = root.join(".codex/config.toml");
        assert!(matches!(
            person(absolute.to_str().unwrap()),
            Some(Guard::Person(_))
        ));
        assert_eq!(person("CLAUDE.md"), None);
        assert_eq!(person("src/main.rs"), None);
        assert_eq!(
            guard("read_file", &json!({"path": ".claude/x"}), root),
            None
        );
        // The tool itself writes agent config named as such (the gate asked a person first)…
        write(
            &ctx,
            json!({"path": ".claude/settings.json", "content": "{}"}),
        )
        .await
        .unwrap();
        // …and refuses to reach it under another name.
        for path in ["cfg/settings.json", "cfg/new.json", "tasks"] {
            let e = write(&ctx, json!({"path": path, "content": "{}"}))
                .await
                .unwrap_err();
            assert!(
                matches!(&e, ToolError::Refused(m) if m.contains("through a symbolic link")),
                "{path}: {e}"
            );
        }
        assert!(!root.join(".claude/new.json").exists() && !root.join(".vscode").exists());
    }

    #[tokio::test]
    async fn new_files_get_the_usual_mode() {
        use std::os::unix::fs::PermissionsExt;
        let (_tmp, ctx) = session();
        write(&ctx, json!({"path": "n.txt", "content": "x"}))
            .await
            .unwrap();
        let mode = std::fs::metadata(ctx.root.join("n.txt"))
            .unwrap()
            .permissions()
            .mode();
        // 0666 less the umask, like any new file; not the 0600 of a private temp file.
        std::fs::write(ctx.root.join("reference"), "").unwrap();
        let usual = std::fs::metadata(ctx.root.join("reference")).unwrap();
        assert_eq!(mode, usual.permissions().mode());
    }

    #[tokio::test]
    async fn symlinks_are_written_through_inside_and_refused_out() {
        let (tmp, ctx) = session();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("target.txt"), "keep\n").unwrap();
        std::fs::create_dir(ctx.root.join("sub")).unwrap();
        std::fs::write(ctx.root.join("sub/real.txt"), "old\n").unwrap();
        let link = |target: &std::path::Path, name: &str| {
            std::os::unix::fs::symlink(target, ctx.root.join(name)).unwrap();
        };
        link(&outside.join("target.txt"), "abs-out");
        link("../outside/target.txt".as_ref(), "rel-out");
        link(&outside.join("new.txt"), "dangling-out");
        link(&outside, "out-dir");
        link("sub/real.txt".as_ref(), "in-link");
        link("sub".as_ref(), "in-dir");
        for path in [
            "abs-out",
            "rel-out",
            "dangling-out",
            "out-dir/x.txt",
            "out-dir/target.txt",
        ] {
            let e = write(&ctx, json!({"path": path, "content": "pwned"}))
                .await
                .unwrap_err();
            assert!(matches!(e, ToolError::OutsideRoot(_)), "{path}: {e}");
        }
        let left: Vec<_> = std::fs::read_dir(&outside).unwrap().collect();
        assert_eq!(left.len(), 1);
        assert_eq!(
            std::fs::read_to_string(outside.join("target.txt")).unwrap(),
            "keep\n"
        );
        // Inside, a link is written through and stays a link.
        let out = write(&ctx, json!({"path": "in-link", "content": "new\n"}))
            .await
            .unwrap();
        assert_eq!(out.text, "replaced in-link (4 bytes written)");
        assert_eq!(
            std::fs::read_to_string(ctx.root.join("sub/real.txt")).unwrap(),
            "new\n"
        );
        assert!(ctx.root.join("in-link").is_symlink());
        write(&ctx, json!({"path": "in-dir/made.txt", "content": "m"}))
            .await
            .unwrap();
        assert!(ctx.root.join("sub/made.txt").is_file());
    }

    /// A thread swaps `d` between a real directory inside the root and a symlink to one
    /// outside (an atomic exchange, as fast as it can) while the tools read and write in
    /// `d`. Every call must land inside or be refused; nothing outside may change or leak.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_symlink_swapped_in_mid_call_never_leads_out() {
        use super::super::fs::ReadFile;
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::time::{Duration, Instant};

        let (tmp, ctx) = session();
        let outside = tmp.path().canonicalize().unwrap().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("f.txt"), "outside\n").unwrap();
        let (d, alt) = (ctx.root.join("d"), ctx.root.join("alt"));
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("f.txt"), "inside\n").unwrap();
        std::os::unix::fs::symlink(&outside, &alt).unwrap();

        let (stop, swaps) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
        );
        let swapper = {
            let (stop, swaps) = (stop.clone(), swaps.clone());
            let (d, alt) = (d.clone(), alt.clone());
            std::thread::spawn(move || {
                let cwd = rustix::fs::CWD;
                let exchange = rustix::fs::RenameFlags::EXCHANGE;
                while !stop.load(Ordering::Relaxed) {
                    rustix::fs::renameat_with(cwd, &d, cwd, &alt, exchange).unwrap();
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            })
        };

        let (mut written, mut write_refused, mut read_ok, mut read_refused) = (0, 0, 0, 0);
        let deadline = Instant::now() + Duration::from_millis(800);
        let mut i = 0;
        while Instant::now() < deadline || i < 300 {
            let args = json!({"path": format!("d/w{i}.txt"), "content": "x"});
            match write(&ctx, args).await {
                Ok(_) => written += 1,
                Err(ToolError::OutsideRoot(_) | ToolError::NotFound(_)) => write_refused += 1,
                Err(e) => panic!("write {i}: {e:?}"),
            }
            match ReadFile.call(json!({"path": "d/f.txt"}), &ctx).await {
                Ok(out) => {
                    assert_eq!(out.text, "inside\n", "read {i}");
                    read_ok += 1;
                }
                Err(ToolError::OutsideRoot(_) | ToolError::NotFound(_)) => read_refused += 1,
                Err(e) => panic!("read {i}: {e:?}"),
            }
            i += 1;
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();

        let names = |dir: &std::path::Path| -> Vec<String> {
            std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names(&outside), ["f.txt"], "nothing appeared outside");
        assert_eq!(
            std::fs::read_to_string(outside.join("f.txt")).unwrap(),
            "outside\n"
        );
        let real = if d.is_symlink() { &alt } else { &d };
        let landed = names(real).iter().filter(|n| n.starts_with('w')).count();
        assert_eq!(landed, written, "every successful write is inside");
        let swaps = swaps.load(Ordering::Relaxed);
        let counts = format!(
            "{i} rounds, {swaps} swaps: {written} written, {write_refused} write refusals, \
             {read_ok} reads, {read_refused} read refusals"
        );
        assert!(
            written > 0 && write_refused > 0 && read_ok > 0 && read_refused > 0,
            "both outcomes must happen or the race did not run: {counts}"
        );
    }
}

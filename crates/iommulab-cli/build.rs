//! Records the git revision the binary is built from, for `iommulab --version`.
//!
//! `IOMMULAB_GIT_REV` is set to the short commit id (with `-dirty` when tracked files have
//! uncommitted changes), or to `unknown` when this is not a git checkout (a source archive,
//! `pip install` from an sdist) or git is missing. A packager may set `IOMMULAB_GIT_REV`
//! in the environment to override it.

use std::process::Command;

/// `git <args>` in the crate's folder, its trimmed stdout if it succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=IOMMULAB_GIT_REV");
    println!("cargo:rerun-if-changed=build.rs");
    let rev = match std::env::var("IOMMULAB_GIT_REV") {
        Ok(r) if !r.is_empty() => r,
        _ => match git(&["rev-parse", "--short=12", "HEAD"]) {
            Some(commit) => {
                // Rebuild when HEAD moves, its branch moves, or the index changes (a commit
                // or a checkout); the paths work in worktrees too.
                for path in [
                    git(&["rev-parse", "--git-path", "HEAD"]),
                    git(&["rev-parse", "--git-path", "index"]),
                    git(&["symbolic-ref", "-q", "HEAD"])
                        .and_then(|r| git(&["rev-parse", "--git-path", &r])),
                ]
                .into_iter()
                .flatten()
                {
                    println!("cargo:rerun-if-changed={path}");
                }
                let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                    .is_some_and(|s| !s.is_empty());
                if dirty {
                    format!("{commit}-dirty")
                } else {
                    commit
                }
            }
            None => "unknown".to_owned(),
        },
    };
    println!("cargo:rustc-env=IOMMULAB_GIT_REV={rev}");
}

//! A small tmpfs for the sled directories of the disk-full cell, filled to the last byte
//! and freed again. Mounting needs root (CAP_SYS_ADMIN); without it the cell is skipped with
//! the reason, never passed silently.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

/// Size of the tmpfs: room for six small sled directories.
const SIZE: &str = "96m";

pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mount a tmpfs on `dir`; `Err` says why it cannot be (the cell is then skipped).
    pub fn mount(dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)?;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            bail!("mounting a tmpfs needs root; run the matrix as root for this cell");
        }
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={SIZE}"), "tmpfs"])
            .arg(dir)
            .output()
            .context("run mount")?;
        if !output.status.success() {
            bail!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    fn filler(&self) -> PathBuf {
        self.dir.join("filler")
    }

    /// Write a file until the filesystem is full; returns the bytes written.
    pub fn fill(&self) -> anyhow::Result<u64> {
        let mut file = std::fs::File::create(self.filler())?;
        let block = vec![0u8; 1 << 20];
        let mut written = 0u64;
        loop {
            match file.write(&block) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => return Err(e.into()),
            }
        }
        // The last partial blocks.
        let small = vec![0u8; 4096];
        while let Ok(n) = file.write(&small) {
            if n == 0 {
                break;
            }
            written += n as u64;
        }
        Ok(written)
    }

    pub fn free(&self) {
        let _ = std::fs::remove_file(self.filler());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        self.free();
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

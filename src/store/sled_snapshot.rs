//! A data directory's sled database into a backup and back: every tree, every record.
//!
//! Blocking: call from `spawn_blocking`. The database is flushed first, then each tree is read
//! in turn; a `hermes serve` holding the directory does this itself (asked through its control
//! socket, `hermes.backup`), so the backup is taken while it serves.

use std::path::Path;

use crate::backup::archive::{ArchiveReader, ArchiveWriter, Frame};
use crate::backup::{BackupError, BusKind, Manifest, Progress};

fn store(e: sled::Error) -> BackupError {
    BackupError::Store(e.to_string())
}

fn tree_name(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

/// Write every tree of `db` to `out`; `source` names the directory in the manifest.
pub fn backup(
    db: &sled::Db,
    out: &Path,
    source: &str,
    progress: &dyn Progress,
) -> Result<Manifest, BackupError> {
    db.flush().map_err(store)?;
    let names = db.tree_names();
    let mut trees = Vec::new();
    let mut total = 0u64;
    for name in &names {
        let tree = db.open_tree(name).map_err(store)?;
        total += tree.len() as u64;
        trees.push((name.to_vec(), tree));
    }
    progress.start("sled trees", Some(total));
    let mut writer = ArchiveWriter::create(out)?;
    let mut manifest = Manifest::new(BusKind::Embedded, source.to_string());
    for (name, tree) in trees {
        let mut count = 0u64;
        for entry in tree.iter() {
            let (key, value) = entry.map_err(store)?;
            writer.frame(&Frame::TreeEntry {
                tree: name.clone(),
                key: key.to_vec(),
                value: value.to_vec(),
            })?;
            count += 1;
            progress.advance(1);
        }
        if count > 0 {
            manifest.trees.insert(tree_name(&name), count);
        }
        manifest.records += count;
    }
    writer.finish(manifest)
}

/// What `db` already holds: the non-empty trees with their sizes; empty when it holds nothing.
pub fn contents(db: &sled::Db) -> Result<Vec<(String, usize)>, BackupError> {
    let mut held = Vec::new();
    for name in db.tree_names() {
        let tree = db.open_tree(&name).map_err(store)?;
        if !tree.is_empty() {
            held.push((tree_name(&name), tree.len()));
        }
    }
    Ok(held)
}

/// Restore the backup at `path` into `db`. A database holding anything is refused unless
/// `force`, which empties every tree first. The whole file is verified before anything is
/// written.
pub fn restore(
    db: &sled::Db,
    path: &Path,
    force: bool,
    progress: &dyn Progress,
) -> Result<Manifest, BackupError> {
    let manifest = crate::backup::archive::read_manifest(path)?;
    if manifest.bus != BusKind::Embedded {
        return Err(BackupError::WrongBus {
            backup: manifest.bus,
            target: BusKind::Embedded,
            hint: "nats://… (a fresh nats-server)",
        });
    }
    let held = contents(db)?;
    if !held.is_empty() && !force {
        let what = held
            .iter()
            .map(|(name, n)| format!("{name}: {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(BackupError::NotEmpty {
            what: format!("data directory trees {what}"),
        });
    }
    progress.start("verifying", Some(manifest.records));
    ArchiveReader::verify(path)?;
    if force {
        for name in db.tree_names() {
            db.open_tree(&name).map_err(store)?.clear().map_err(store)?;
        }
    }
    progress.start("restoring sled trees", Some(manifest.records));
    let mut reader = ArchiveReader::open(path)?;
    let mut open: Option<(Vec<u8>, sled::Tree)> = None;
    while let Some(frame) = reader.next_frame()? {
        let Frame::TreeEntry { tree, key, value } = frame else {
            continue;
        };
        let current = match open.take() {
            Some((name, t)) if name == tree => (name, t),
            _ => {
                let t = db.open_tree(&tree).map_err(store)?;
                (tree, t)
            }
        };
        current.1.insert(key, value).map_err(store)?;
        open = Some(current);
        progress.advance(1);
    }
    db.flush().map_err(store)?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::Quiet;

    #[test]
    fn every_tree_comes_back_and_a_non_empty_target_needs_force() {
        let dir = tempfile::tempdir().unwrap();
        let source = sled::open(dir.path().join("a")).unwrap();
        source.insert(b"root", b"1").unwrap();
        let sessions = source.open_tree("sessions").unwrap();
        for i in 0..50u32 {
            sessions.insert(i.to_be_bytes(), vec![7u8; 100]).unwrap();
        }
        source.open_tree("empty").unwrap();
        let out = dir.path().join("b.hermes");
        let manifest = backup(&source, &out, "a", &Quiet).unwrap();
        assert_eq!(manifest.trees.get("sessions"), Some(&50));
        assert_eq!(manifest.records, 51);

        let target = sled::open(dir.path().join("c")).unwrap();
        restore(&target, &out, false, &Quiet).unwrap();
        let restored = target.open_tree("sessions").unwrap();
        assert_eq!(restored.len(), 50);
        assert_eq!(target.get(b"root").unwrap().as_deref(), Some(&b"1"[..]));

        let err = restore(&target, &out, false, &Quiet)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--force") && err.contains("sessions: 50"),
            "{err}"
        );
        target
            .open_tree("stray")
            .unwrap()
            .insert(b"x", b"y")
            .unwrap();
        restore(&target, &out, true, &Quiet).unwrap();
        assert!(target.open_tree("stray").unwrap().is_empty());
        assert_eq!(target.open_tree("sessions").unwrap().len(), 50);
    }
}

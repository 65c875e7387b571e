//! The backup file: one file holding a manifest and the records it describes.
//!
//! ```text
//! HERMES-BACKUP\n                       magic
//! u64 manifest length, manifest JSON    what it holds (see `Manifest`), with the body's sha256
//! body: frames, each `u8 kind` and length-prefixed fields (`u32` big-endian length, bytes)
//!   1 tree entry      tree, key, value
//!   2 stream          name, config (JSON)         before the stream's messages
//!   3 stream message  stream, subject, headers (JSON pairs), payload
//!   0 end
//! ```
//!
//! The body is written to a temporary file beside the output first, so the manifest at the
//! front can carry its counts and digest; the finished file replaces `out` in one rename, and a
//! failed backup leaves nothing behind.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{BackupError, Manifest};

const MAGIC: &[u8] = b"HERMES-BACKUP\n";
/// Largest manifest read (a manifest lists trees and streams, never records).
const MAX_MANIFEST: u64 = 16 << 20;
/// Largest field read: a sled value or a JetStream message.
const MAX_FIELD: u32 = 256 << 20;

/// One record of the body.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    TreeEntry {
        tree: Vec<u8>,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Stream {
        name: String,
        config: serde_json::Value,
    },
    StreamMessage {
        stream: String,
        subject: String,
        headers: Vec<(String, String)>,
        payload: Vec<u8>,
    },
}

/// Writes the body, then the finished file.
pub struct ArchiveWriter {
    out: PathBuf,
    body: BufWriter<tempfile::NamedTempFile>,
    digest: Sha256,
}

fn io(path: &Path, what: &str, e: std::io::Error) -> BackupError {
    BackupError::Io {
        path: path.display().to_string(),
        what: what.to_string(),
        reason: e.to_string(),
    }
}

/// The directory `path` goes into (`.` for a bare file name).
pub(super) fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

impl ArchiveWriter {
    /// Start a backup that will be written to `out`.
    pub fn create(out: &Path) -> Result<Self, BackupError> {
        let dir = parent_of(out);
        let body = tempfile::NamedTempFile::new_in(&dir)
            .map_err(|e| io(&dir, "create a temporary file in", e))?;
        Ok(Self {
            out: out.to_path_buf(),
            body: BufWriter::new(body),
            digest: Sha256::new(),
        })
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), BackupError> {
        self.digest.update(bytes);
        let out = self.out.clone();
        self.body
            .write_all(bytes)
            .map_err(|e| io(&out, "write the backup body for", e))
    }

    fn field(&mut self, bytes: &[u8]) -> Result<(), BackupError> {
        let len =
            u32::try_from(bytes.len()).map_err(|_| BackupError::TooLarge { size: bytes.len() })?;
        self.put(&len.to_be_bytes())?;
        self.put(bytes)
    }

    /// Append one record.
    pub fn frame(&mut self, frame: &Frame) -> Result<(), BackupError> {
        match frame {
            Frame::TreeEntry { tree, key, value } => {
                self.put(&[1])?;
                self.field(tree)?;
                self.field(key)?;
                self.field(value)
            }
            Frame::Stream { name, config } => {
                self.put(&[2])?;
                self.field(name.as_bytes())?;
                self.field(&serde_json::to_vec(config).map_err(BackupError::encode)?)
            }
            Frame::StreamMessage {
                stream,
                subject,
                headers,
                payload,
            } => {
                self.put(&[3])?;
                self.field(stream.as_bytes())?;
                self.field(subject.as_bytes())?;
                self.field(&serde_json::to_vec(headers).map_err(BackupError::encode)?)?;
                self.field(payload)
            }
        }
    }

    /// Write the manifest (with the body's digest) and the body to `out`, replacing it.
    pub fn finish(mut self, mut manifest: Manifest) -> Result<Manifest, BackupError> {
        self.put(&[0])?;
        let out = self.out.clone();
        let mut body = self
            .body
            .into_inner()
            .map_err(|e| io(&out, "write the backup body for", e.into_error()))?;
        manifest.sha256 = hex(&self.digest.finalize());
        let head = serde_json::to_vec_pretty(&manifest).map_err(BackupError::encode)?;
        let dir = parent_of(&out);
        let mut file = tempfile::NamedTempFile::new_in(&dir)
            .map_err(|e| io(&dir, "create a temporary file in", e))?;
        let write = |file: &mut tempfile::NamedTempFile, body: &mut tempfile::NamedTempFile| {
            file.write_all(MAGIC)?;
            file.write_all(&(head.len() as u64).to_be_bytes())?;
            file.write_all(&head)?;
            body.as_file_mut().seek(SeekFrom::Start(0))?;
            std::io::copy(body.as_file_mut(), file)?;
            file.as_file().sync_all()
        };
        write(&mut file, &mut body).map_err(|e| io(&out, "write", e))?;
        file.persist(&out)
            .map_err(|e| io(&out, "move the finished backup to", e.error))?;
        Ok(manifest)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Read just the manifest of `path`.
pub fn read_manifest(path: &Path) -> Result<Manifest, BackupError> {
    let file = File::open(path).map_err(|e| io(path, "open", e))?;
    let mut reader = BufReader::new(file);
    manifest_of(path, &mut reader)
}

fn manifest_of(path: &Path, reader: &mut impl Read) -> Result<Manifest, BackupError> {
    let not_backup = |reason: String| BackupError::NotABackup {
        path: path.display().to_string(),
        reason,
    };
    let mut magic = [0u8; MAGIC.len()];
    reader
        .read_exact(&mut magic)
        .map_err(|e| not_backup(format!("it is too short ({e})")))?;
    if magic != MAGIC {
        return Err(not_backup("it does not start with HERMES-BACKUP".into()));
    }
    let mut len = [0u8; 8];
    reader
        .read_exact(&mut len)
        .map_err(|e| not_backup(e.to_string()))?;
    let len = u64::from_be_bytes(len);
    if len > MAX_MANIFEST {
        return Err(not_backup(format!("its manifest claims {len} bytes")));
    }
    let mut head = vec![0u8; len as usize];
    reader
        .read_exact(&mut head)
        .map_err(|e| not_backup(e.to_string()))?;
    let manifest: Manifest = serde_json::from_slice(&head)
        .map_err(|e| not_backup(format!("its manifest is unreadable: {e}")))?;
    manifest.check_version()?;
    Ok(manifest)
}

/// Reads a backup: the manifest, then the records, checking the digest at the end.
pub struct ArchiveReader {
    path: PathBuf,
    reader: BufReader<File>,
    digest: Sha256,
    manifest: Manifest,
    done: bool,
}

impl ArchiveReader {
    pub fn open(path: &Path) -> Result<Self, BackupError> {
        let file = File::open(path).map_err(|e| io(path, "open", e))?;
        let mut reader = BufReader::new(file);
        let manifest = manifest_of(path, &mut reader)?;
        Ok(Self {
            path: path.to_path_buf(),
            reader,
            digest: Sha256::new(),
            manifest,
            done: false,
        })
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    fn take(&mut self, buf: &mut [u8]) -> Result<(), BackupError> {
        self.reader
            .read_exact(buf)
            .map_err(|e| BackupError::NotABackup {
                path: self.path.display().to_string(),
                reason: format!("it ends early ({e}); was it copied whole?"),
            })?;
        self.digest.update(&buf[..]);
        Ok(())
    }

    fn field(&mut self) -> Result<Vec<u8>, BackupError> {
        let mut len = [0u8; 4];
        self.take(&mut len)?;
        let len = u32::from_be_bytes(len);
        if len > MAX_FIELD {
            return Err(BackupError::NotABackup {
                path: self.path.display().to_string(),
                reason: format!("a record claims {len} bytes"),
            });
        }
        let mut bytes = vec![0u8; len as usize];
        self.take(&mut bytes)?;
        Ok(bytes)
    }

    fn text(&mut self) -> Result<String, BackupError> {
        let bytes = self.field()?;
        String::from_utf8(bytes).map_err(|e| BackupError::NotABackup {
            path: self.path.display().to_string(),
            reason: format!("a name is not UTF-8: {e}"),
        })
    }

    fn json<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, BackupError> {
        let bytes = self.field()?;
        serde_json::from_slice(&bytes).map_err(|e| BackupError::NotABackup {
            path: self.path.display().to_string(),
            reason: format!("a record is unreadable: {e}"),
        })
    }

    /// The next record; `None` at the end, once the digest matched the manifest's.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, BackupError> {
        if self.done {
            return Ok(None);
        }
        let mut kind = [0u8; 1];
        self.take(&mut kind)?;
        let frame = match kind[0] {
            0 => {
                self.done = true;
                let digest = hex(&self.digest.clone().finalize());
                if digest != self.manifest.sha256 {
                    return Err(BackupError::NotABackup {
                        path: self.path.display().to_string(),
                        reason: format!(
                            "its content does not match its manifest (sha256 {digest}, manifest \
                             {}): the file is damaged",
                            self.manifest.sha256
                        ),
                    });
                }
                return Ok(None);
            }
            1 => Frame::TreeEntry {
                tree: self.field()?,
                key: self.field()?,
                value: self.field()?,
            },
            2 => Frame::Stream {
                name: self.text()?,
                config: self.json()?,
            },
            3 => Frame::StreamMessage {
                stream: self.text()?,
                subject: self.text()?,
                headers: self.json()?,
                payload: self.field()?,
            },
            other => {
                return Err(BackupError::NotABackup {
                    path: self.path.display().to_string(),
                    reason: format!("unknown record kind {other}"),
                })
            }
        };
        Ok(Some(frame))
    }

    /// Read every record to the end, checking the digest: a damaged file is found before
    /// anything is restored from it.
    pub fn verify(path: &Path) -> Result<u64, BackupError> {
        let mut reader = Self::open(path)?;
        let mut records = 0;
        while reader.next_frame()?.is_some() {
            records += 1;
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest::new(super::super::BusKind::Embedded, "test".into())
    }

    #[test]
    fn a_backup_file_round_trips_its_records_and_a_flipped_byte_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("b.hermes");
        let frames = vec![
            Frame::TreeEntry {
                tree: b"sessions".to_vec(),
                key: b"k".to_vec(),
                value: vec![0, 1, 2],
            },
            Frame::Stream {
                name: "HERMES_AUDIT".into(),
                config: serde_json::json!({"name": "HERMES_AUDIT"}),
            },
            Frame::StreamMessage {
                stream: "HERMES_AUDIT".into(),
                subject: "hermes.audit.mcp".into(),
                headers: vec![("Nats-Msg-Id".into(), "x".into())],
                payload: b"{}".to_vec(),
            },
        ];
        let mut writer = ArchiveWriter::create(&out).unwrap();
        for f in &frames {
            writer.frame(f).unwrap();
        }
        writer.finish(manifest()).unwrap();
        let mut reader = ArchiveReader::open(&out).unwrap();
        let mut read = Vec::new();
        while let Some(f) = reader.next_frame().unwrap() {
            read.push(f);
        }
        assert_eq!(read, frames);
        assert_eq!(ArchiveReader::verify(&out).unwrap(), 3);

        let mut bytes = std::fs::read(&out).unwrap();
        let last = bytes.len() - 3;
        bytes[last] ^= 0xff;
        std::fs::write(&out, bytes).unwrap();
        let err = ArchiveReader::verify(&out).unwrap_err().to_string();
        assert!(err.contains("damaged"), "{err}");
        let other = dir.path().join("other");
        std::fs::write(&other, b"hello world, not a backup").unwrap();
        let err = read_manifest(&other).unwrap_err().to_string();
        assert!(err.contains("not a Hermes backup"), "{err}");
    }
}

//! Stored memory vectors: sled tree [`VECTORS_TREE`], key `<user>\0<embedder id>\0<record id>`,
//! value = 8-byte FNV-1a hash of the embedded text (little-endian) + the vector as f32 LE.
//!
//! The embedder id in the key is what keeps models apart: a query embedded by X reads only the
//! `<user>\0X\0` range, so vectors of another model are never compared with it. The text hash
//! says whether a vector is still current: after a record's content changes, or for a record
//! written before an embedder was configured, the memory service re-embeds it lazily at recall
//! ([`super::service`]). Vectors of removed records are pruned by the sweep. Every write bumps
//! the user's write stamp (tree [`super::store::MEMORY_STAMPS_TREE`]) in the same transaction,
//! so the per-user recall index ([`super::user_index`]) picks the new vectors up.

use std::collections::HashMap;
use std::sync::Arc;

use sled::transaction::{TransactionError, TransactionalTree};
use sled::Transactional;

use super::record::MemoryRecord;
use super::store::{MemoryError, MEMORY_STAMPS_TREE};
use super::store_recall::decode_stamp;

/// Name of the vectors tree.
pub const VECTORS_TREE: &str = "memory_vectors";

/// A stored vector and the hash of the text it was computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredVector {
    pub text_hash: u64,
    pub vector: Vec<f32>,
}

/// Memory vectors of all users and embedders.
#[derive(Clone)]
pub struct VectorStore {
    tree: sled::Tree,
    stamps: sled::Tree,
    known_stamps: Arc<super::in_memory::StampMirror>,
}

fn storage(action: &'static str) -> impl FnOnce(sled::Error) -> MemoryError {
    move |source| MemoryError::Storage { action, source }
}

impl VectorStore {
    pub fn open(db: &sled::Db) -> Result<Self, MemoryError> {
        let stamps = db
            .open_tree(MEMORY_STAMPS_TREE)
            .map_err(storage("open its write stamps tree"))?;
        Ok(Self {
            tree: db
                .open_tree(VECTORS_TREE)
                .map_err(storage("open its vectors tree"))?,
            known_stamps: super::in_memory::shared_for(&stamps),
            stamps,
        })
    }

    /// Every vector of `user` stored by `embedder`, by record id.
    pub fn for_user(
        &self,
        user: &str,
        embedder: &str,
    ) -> Result<HashMap<String, StoredVector>, MemoryError> {
        let prefix = key(user, embedder, "");
        let mut out = HashMap::new();
        for entry in self.tree.scan_prefix(&prefix) {
            let (k, v) = entry.map_err(storage("scan memory vectors"))?;
            let id = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
            if let Some(stored) = decode(&v) {
                out.insert(id, stored);
            }
        }
        Ok(out)
    }

    /// Store `record`'s vector by `embedder` (not flushed: vectors can be recomputed).
    pub fn put(
        &self,
        user: &str,
        embedder: &str,
        record_id: &str,
        stored: &StoredVector,
    ) -> Result<(), MemoryError> {
        self.put_many(user, embedder, &[(record_id, stored)])
    }

    /// Store several of `user`'s vectors by `embedder` in one transaction (one stamp bump).
    pub fn put_many(
        &self,
        user: &str,
        embedder: &str,
        items: &[(&str, &StoredVector)],
    ) -> Result<(), MemoryError> {
        let encoded: Vec<(Vec<u8>, Vec<u8>)> = items
            .iter()
            .map(|(id, stored)| (key(user, embedder, id), encode(stored)))
            .collect();
        self.known_stamps
            .write(user, || {
                (&self.tree, &self.stamps).transaction(|(vectors, stamps)| {
                    for (k, v) in &encoded {
                        vectors.insert(k.as_slice(), v.as_slice())?;
                    }
                    bump_stamp(stamps, user)?;
                    Ok(())
                })
            })
            .map_err(|err: TransactionError<()>| MemoryError::Storage {
                action: "write memory vectors",
                source: match err {
                    TransactionError::Storage(source) => source,
                    TransactionError::Abort(()) => {
                        sled::Error::ReportableBug("vector write aborted without a reason".into())
                    }
                },
            })
    }

    /// Remove every vector (any embedder) of records for which `keep(user, record id)` is
    /// false; returns how many were removed.
    pub fn prune(&self, keep: impl Fn(&str, &str) -> bool) -> Result<usize, MemoryError> {
        let mut removed = 0;
        for entry in self.tree.iter() {
            let (k, _) = entry.map_err(storage("scan memory vectors"))?;
            let mut parts = k.split(|b| *b == 0);
            let (Some(user), Some(_), Some(id)) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            if !keep(&String::from_utf8_lossy(user), &String::from_utf8_lossy(id)) {
                self.tree
                    .remove(&k)
                    .map_err(storage("remove a memory vector"))?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// The text a record is embedded from: its content and topics. The slot key is left out: it
/// is an identifier (often an id like `d12:3`), and in a mean-pooled vector its pieces only
/// blur the content (BM25 still matches on it).
pub fn embed_text(record: &MemoryRecord) -> String {
    let mut text = record.content.clone();
    if !record.topics.is_empty() {
        text.push_str(" (");
        text.push_str(&record.topics.join(", "));
        text.push(')');
    }
    text
}

/// 64-bit FNV-1a of `text`.
pub fn text_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Bump `user`'s write stamp inside a transaction.
pub(super) fn bump_stamp(
    stamps: &TransactionalTree,
    user: &str,
) -> sled::transaction::ConflictableTransactionResult<(), ()> {
    let next = stamps
        .get(user.as_bytes())?
        .map_or(0, |v| decode_stamp(&v))
        .wrapping_add(1);
    stamps.insert(user.as_bytes(), &next.to_be_bytes())?;
    Ok(())
}

fn encode(stored: &StoredVector) -> Vec<u8> {
    let mut value = Vec::with_capacity(8 + stored.vector.len() * 4);
    value.extend_from_slice(&stored.text_hash.to_le_bytes());
    for x in &stored.vector {
        value.extend_from_slice(&x.to_le_bytes());
    }
    value
}

fn key(user: &str, embedder: &str, record_id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(user.len() + embedder.len() + record_id.len() + 2);
    k.extend_from_slice(user.as_bytes());
    k.push(0);
    k.extend_from_slice(embedder.as_bytes());
    k.push(0);
    k.extend_from_slice(record_id.as_bytes());
    k
}

fn decode(bytes: &[u8]) -> Option<StoredVector> {
    let (hash, rest) = bytes.split_first_chunk::<8>()?;
    if rest.len() % 4 != 0 {
        return None;
    }
    Some(StoredVector {
        text_hash: u64::from_le_bytes(*hash),
        vector: rest
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> (tempfile::TempDir, VectorStore) {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        (dir, VectorStore::open(&db).unwrap())
    }

    fn v(hash: u64, x: f32) -> StoredVector {
        StoredVector {
            text_hash: hash,
            vector: vec![x, -x, 0.5],
        }
    }

    #[test]
    fn vectors_of_one_embedder_are_never_read_for_another() {
        let (_d, store) = open();
        store.put("alice", "local:a", "r1", &v(1, 1.0)).unwrap();
        store.put("alice", "openai:b", "r1", &v(2, 2.0)).unwrap();
        store.put("alicia", "local:a", "r9", &v(3, 3.0)).unwrap();
        let a = store.for_user("alice", "local:a").unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(a["r1"], v(1, 1.0));
        let b = store.for_user("alice", "openai:b").unwrap();
        assert_eq!(b["r1"], v(2, 2.0));
        assert!(store.for_user("alice", "local").unwrap().is_empty());
    }

    #[test]
    fn prune_removes_vectors_of_records_that_are_gone() {
        let (_d, store) = open();
        store.put("alice", "local:a", "keep", &v(1, 1.0)).unwrap();
        store.put("alice", "local:a", "gone", &v(1, 1.0)).unwrap();
        store.put("alice", "openai:b", "gone", &v(1, 1.0)).unwrap();
        let removed = store.prune(|_, id| id == "keep").unwrap();
        assert_eq!(removed, 2);
        assert_eq!(store.for_user("alice", "local:a").unwrap().len(), 1);
    }

    #[test]
    fn text_hash_changes_with_the_text() {
        assert_ne!(text_hash("budget 5000"), text_hash("budget 8000"));
        assert_eq!(text_hash("x"), text_hash("x"));
    }
}

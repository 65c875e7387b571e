//! An in-memory [`SessionLog`] with fenced appends, for unit tests of what reads and writes
//! the replicated log (JetStream in production).

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;

use super::replica::{LogError, SessionLog};

/// Each key's records with their sequences, oldest first.
type Keys = BTreeMap<(String, String), Vec<(u64, Bytes)>>;

/// Records by `(agent, session)`, sequences shared by all keys like a stream's.
#[derive(Default)]
pub struct MemoryLog {
    inner: Mutex<(u64, Keys)>,
}

impl MemoryLog {
    /// Forget every record, as a purged stream or a wiped JetStream store does; sequences
    /// start again from 1.
    pub fn purge(&self) {
        if let Ok(mut guard) = self.inner.lock() {
            *guard = (0, Keys::new());
        }
    }

    /// Forget the records after the first `keep` of every key, as a log restored from an
    /// older backup; sequences go on from the last one kept.
    pub fn truncate(&self, keep: usize) {
        if let Ok(mut guard) = self.inner.lock() {
            let (seq, keys) = &mut *guard;
            for records in keys.values_mut() {
                records.truncate(keep);
            }
            *seq = keys
                .values()
                .filter_map(|r| r.last().map(|(s, _)| *s))
                .max()
                .unwrap_or(0);
        }
    }
}

fn poisoned() -> LogError {
    LogError::Unavailable("test log lock poisoned".into())
}

#[async_trait]
impl SessionLog for MemoryLog {
    async fn append(
        &self,
        agent: &str,
        session: &str,
        record: Bytes,
        expected: u64,
    ) -> Result<u64, LogError> {
        let mut guard = self.inner.lock().map_err(|_| poisoned())?;
        let (seq, keys) = &mut *guard;
        let records = keys
            .entry((agent.to_owned(), session.to_owned()))
            .or_default();
        if records.last().map_or(0, |(s, _)| *s) != expected {
            return Err(LogError::Fenced {
                agent: agent.to_owned(),
                session: session.to_owned(),
                expected,
            });
        }
        *seq += 1;
        records.push((*seq, record));
        Ok(*seq)
    }

    async fn last(&self, agent: &str, session: &str) -> Result<u64, LogError> {
        let guard = self.inner.lock().map_err(|_| poisoned())?;
        Ok(guard
            .1
            .get(&(agent.to_owned(), session.to_owned()))
            .and_then(|r| r.last())
            .map_or(0, |(s, _)| *s))
    }

    async fn last_record(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Option<(u64, Bytes)>, LogError> {
        let guard = self.inner.lock().map_err(|_| poisoned())?;
        Ok(guard
            .1
            .get(&(agent.to_owned(), session.to_owned()))
            .and_then(|r| r.last().cloned()))
    }

    async fn read_after(
        &self,
        agent: &str,
        session: &str,
        after: u64,
    ) -> Result<Vec<(u64, Bytes)>, LogError> {
        let guard = self.inner.lock().map_err(|_| poisoned())?;
        Ok(guard
            .1
            .get(&(agent.to_owned(), session.to_owned()))
            .map(|r| r.iter().filter(|(s, _)| *s > after).cloned().collect())
            .unwrap_or_default())
    }

    async fn last_of_each(&self, agent: Option<&str>) -> Result<Vec<(u64, Bytes)>, LogError> {
        let guard = self.inner.lock().map_err(|_| poisoned())?;
        Ok(guard
            .1
            .iter()
            .filter(|((a, _), _)| agent.is_none_or(|want| a == want))
            .filter_map(|(_, records)| records.last().cloned())
            .collect())
    }
}
